// Package fetch is the HTTP client of the ingest pipeline: it downloads the
// files a submission names, verifying their size and digest while they
// stream (and computing their SHA-256 in the same pass, for storage), and
// resuming cut transfers instead of starting over.
//
// Every request goes through one retrying client (go-retryablehttp) whose
// transport bounds the requests in flight per host and fails a request that
// moves no byte for Config.Timeout (while its body is sent, its answer awaited
// or its answer's body read), so that a stalled server costs one retry rather
// than a stuck worker.
//
// A download is written to dest+".part" and renamed to dest only after its
// size and digest have been checked and the data fsynced, so a file at dest
// is always complete. A cut or stalled transfer resumes with a Range request
// from the .part file's length, within one call and across calls: a .part
// left by a killed process is picked up by the next Download of the same
// dest. Only one Download of a given dest may run at a time.
//
// Errors say whether retrying can help: Permanent is true for digest and size
// mismatches, 4xx statuses other than 408/425/429, bad URLs and schemes, and
// local files that do not exist. A failed Download, Fetch or Peek is a
// *RequestError, whose message names the URL once and the cause in plain
// words: "download https://host/x: connection refused (5 requests)". A
// download, or a request whose context WaitsForBusy marks (a batch's
// payload read), answered 503 or 429 with a Retry-After is not asked again
// here: it ends at once with a busy *StatusError saying when (RetryAt),
// and its job or batch waits that long without holding a worker
// (handlers).
package fetch
