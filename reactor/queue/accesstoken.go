package queue

import (
	"encoding/json"
	"fmt"
	"time"
)

// The token node of an access request holds the request and, once it is
// done, its result. The keys mrt-zk's Access class reads keep mrt-zk's
// names (token, cloud-content-byte, status, url,
// anticipated-availability-time), so Merritt's tools can read an ingestq
// request; ingestq's own keys sit beside them.
type AccessToken struct {
	// mrt-zk's keys.
	Token        string `json:"token"`                                   // the request's uuid: in the package's name
	ContentBytes int64  `json:"cloud-content-byte"`                      // the content's size, estimated from the inventory
	TokenStatus  string `json:"status"`                                  // TokenNotReady, TokenReady or TokenFailed
	URL          string `json:"url,omitempty"`                           // where the package is, once Ready
	Anticipated  string `json:"anticipated-availability-time,omitempty"` // RFC 3339: a rough guess at when it is ready

	// ingestq's keys: what to assemble.
	ARK         string   `json:"ark"`
	Profile     string   `json:"profile,omitempty"` // the object's collection: its storage, and where its packages go
	Version     int      `json:"version,omitempty"` // 0: every version (the whole object), unless Files
	Files       []string `json:"files,omitempty"`   // some files only (of Version, or of the latest)
	Format      string   `json:"format"`            // FormatZip or FormatTarGz
	RequestedBy string   `json:"requested_by,omitempty"`
	Requested   string   `json:"requested,omitempty"` // RFC 3339

	// The result, once Ready.
	Package *AccessPackage `json:"package,omitempty"`
}

// AccessPackage is an assembled package: where it is and what it holds.
type AccessPackage struct {
	Name     string `json:"name"`     // file name, also its key in S3
	Size     int64  `json:"size"`     // bytes
	SHA256   string `json:"sha256"`   // of the whole package
	Entries  int    `json:"entries"`  // files in it
	Expires  string `json:"expires"`  // RFC 3339: it is removed after
	Where    string `json:"where"`    // "folder" or "s3"
	Location string `json:"location"` // the folder's path or the s3:// URL it was written to
	Host     string `json:"host"`     // the daemon that made it (a folder is that host's)
}

// Expired tells whether the package's time is up at now: the sweep removes
// it, and the API answers 410 for it. An expiry that does not read is
// never up.
func (p *AccessPackage) Expired(now time.Time) bool {
	at, err := time.Parse(time.RFC3339, p.Expires)
	return err == nil && !now.Before(at)
}

// Token statuses (the token's "status", beside the request's status node).
const (
	TokenNotReady = "NotReady"
	TokenReady    = "Ready"
	TokenFailed   = "Failed"
)

// Package formats.
const (
	FormatZip   = "zip"
	FormatTarGz = "tar.gz"
)

// Ours tells whether the request was made by ingestq (its token names an
// ARK and a format): a daemon leaves others' requests to their own tools.
func (a *Access) Ours() bool {
	t, err := a.AccessToken()
	return err == nil && t.ARK != "" && (t.Format == FormatZip || t.Format == FormatTarGz)
}

// AccessToken reads the request's token as ingestq's fields.
func (a *Access) AccessToken() (AccessToken, error) {
	var t AccessToken
	data, err := json.Marshal(a.Token)
	if err == nil {
		err = json.Unmarshal(data, &t)
	}
	if err != nil {
		return AccessToken{}, fmt.Errorf("access request %s: token: %w", a.ID, err)
	}
	return t, nil
}

// Map returns t as a token node's JSON object, laid over base: keys t does
// not know (another tool's) are kept.
func (t AccessToken) Map(base map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	var m map[string]any
	_ = json.Unmarshal(mustJSON(t), &m) // a struct of plain fields always encodes
	for k, v := range m {
		out[k] = v
	}
	return out
}
