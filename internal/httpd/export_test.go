package httpd

import "time"

// SetIOTimeout shortens the body's and the writes' deadlines for the tests.
func SetIOTimeout(d time.Duration) { ioTimeout = d }
