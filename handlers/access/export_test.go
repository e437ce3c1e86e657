package access

// Remembered is how many package names as remembers (served).
func Remembered(as *Assembler) int {
	as.served.mu.Lock()
	defer as.served.mu.Unlock()
	return len(as.served.byPkg)
}
