package cli_test

// The audit's progress line is checked on a pseudo-terminal (terminal_test.go).
func init() { auditTerminal = openTerminal }
