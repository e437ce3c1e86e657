// Package notify tells the outside world that a job finished or a batch
// reported: Callback POSTs a JSON document to a profile's URL (its
// callback, or its report_callback) through a retrying HTTP client, and
// Mailer sends a plain-text e-mail over SMTP.
//
// Both report failures with enough detail for an operator to act without
// reproducing the problem: the URL, status and start of the reply body for
// a callback; the server and the step of the SMTP conversation for mail.
package notify
