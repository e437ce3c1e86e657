//go:build !unix

package cli

import "io"

// termWidth is 0, unknown: the progress line is drawn whole.
func termWidth(io.Writer) int { return 0 }
