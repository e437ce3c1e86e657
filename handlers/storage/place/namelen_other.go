//go:build !linux

package place

import "errors"

// namelen: statfs says no name length here (f_namelen is Linux's);
// pathconf's _PC_NAME_MAX would.
func namelen(string) (int, error) { return 0, errors.New("no f_namelen on this system") }
