package checkm

import (
	"errors"
	"fmt"
	"strings"
)

// maxARKBytes bounds an ARK: storage keeps at most 200 bytes of one.
const maxARKBytes = 200

// CheckARK checks that a depositor's primary identifier is an ARK of the
// form ark:/NAAN/NAME: NAAN digits (as a profile's naan is), NAME one or
// more of the characters an ARK's name may hold (letters, digits and
// = ~ * + @ _ $ . / - %), at most 200 bytes in all. It does not quote s,
// so callers say where it came from. The NAAN need not be the profile's:
// an object may keep an ARK minted elsewhere.
func CheckARK(s string) error {
	rest, ok := strings.CutPrefix(s, "ark:/")
	naan, name, _ := strings.Cut(rest, "/")
	switch {
	case !ok:
		return errors.New("not an ARK: want ark:/NAAN/NAME")
	case len(s) > maxARKBytes:
		return fmt.Errorf("longer than %d bytes", maxARKBytes)
	case naan == "" || strings.Trim(naan, "0123456789") != "":
		return errors.New("its NAAN is not digits: want ark:/NAAN/NAME")
	case name == "":
		return errors.New("no name after its NAAN: want ark:/NAAN/NAME")
	case strings.ContainsFunc(name, func(r rune) bool { return !arkNameRune(r) }):
		return errors.New("its name has a character an ARK may not hold (want letters, digits and = ~ * + @ _ $ . / - %)")
	}
	return nil
}

func arkNameRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("=~*+@_$./-%", r)
}
