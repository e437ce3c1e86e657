package place

import (
	"context"
	"fmt"
	"mime"
	"net/url"
	"time"
)

// MaxPresign is the longest a presigned URL can be valid (S3's signature
// version 4 allows seven days).
const MaxPresign = 7 * 24 * time.Hour

// Presign returns a URL that GETs key without credentials until expiry
// has passed; filename (optional) is the name a browser saves it under.
func (s *S3) Presign(ctx context.Context, key string, expiry time.Duration, filename string) (string, error) {
	obj, err := s.object(key)
	if err != nil {
		return "", err
	}
	if expiry <= 0 || expiry > MaxPresign {
		return "", fmt.Errorf("place %s: presign %s: expiry %v: want more than 0 and at most %v", s, key, expiry, MaxPresign)
	}
	params := url.Values{}
	if filename != "" {
		params.Set("response-content-disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	}
	u, err := s.core.Client.PresignedGetObject(ctx, s.bucket, obj, expiry, params)
	if err != nil {
		return "", fmt.Errorf("place %s: presign %s: %w", s, key, err)
	}
	return u.String(), nil
}
