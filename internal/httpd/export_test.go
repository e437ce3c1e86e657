package httpd

import "time"

// SetIOTimeout shortens the body's and the writes' deadlines for the tests.
func SetIOTimeout(d time.Duration) { ioTimeout = d }

// OwnNames is ownNames: the names a server always answers to, of the
// machine's name given and the listen address.
var OwnNames = ownNames
