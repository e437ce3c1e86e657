package place

import "time"

// defaultIdleTimeout is how long an S3 request may move no byte, either
// way (stall.Transport), before it fails as the store being out of reach
// (a frozen or hung server keeps its connections open and never answers).
// A transfer that moves bytes is never cut, however long it takes; a
// store's slowest answer (completing a multipart upload of gigabytes)
// comes well within it.
const defaultIdleTimeout = 30 * time.Second

// s3Tries is how many times the client sends one request: a store that
// does not answer is found out after at most s3Tries idle timeouts, where
// minio-go's ten tries of a minute each kept a step ten minutes.
const s3Tries = 2
