package place

import (
	"strings"
	"testing"
	"time"
)

func TestParseS3URL(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	for rawURL, want := range map[string]s3Config{
		"s3://bucket": {bucket: "bucket", endpoint: awsEndpoint, secure: true, partSize: defaultPartSize, idle: defaultIdleTimeout},
		"s3://bucket/a/b/?region=eu-west-1": {bucket: "bucket", prefix: "a/b/", endpoint: awsEndpoint,
			region: "eu-west-1", secure: true, partSize: defaultPartSize, idle: defaultIdleTimeout},
		"s3://b-1/ocfl?endpoint=127.0.0.1:9000&secure=false&partsize=8MiB": {bucket: "b-1", prefix: "ocfl/",
			endpoint: "127.0.0.1:9000", custom: true, region: "us-east-1", partSize: 8 << 20, idle: defaultIdleTimeout},
		"s3://b-1/ocfl?endpoint=minio:9000&partsize=6000000&idletimeout=2m": {bucket: "b-1", prefix: "ocfl/",
			endpoint: "minio:9000", custom: true, region: "us-east-1", secure: true, partSize: 6000000, idle: 2 * time.Minute},
	} {
		got, err := parseS3URL(rawURL)
		if err != nil || got != want {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", rawURL, got, err, want)
		}
	}
}

func TestParseS3URLRegionFromEnvironment(t *testing.T) {
	t.Setenv("AWS_REGION", "ca-central-1")
	c, err := parseS3URL("s3://bucket/p?endpoint=h:1")
	if err != nil || c.region != "ca-central-1" {
		t.Fatalf("region %q, %v; want AWS_REGION's ca-central-1", c.region, err)
	}
}

func TestParseS3URLRefusals(t *testing.T) {
	for rawURL, want := range map[string]string{
		"s3://AKIA:secret@bucket/p": "credentials do not belong in the URL",
		// url.Parse refuses these, repeating them; a secret in the query is
		// an unknown parameter, and shown masked.
		"s3://AKIA:se cret@bucket/p":                 "s3://AKIA:xxxxx@bucket/p",
		"s3://AKIA:secret%zz@bucket/p":               "s3://AKIA:xxxxx@bucket/p",
		"s3://bucket/p?endpoint=h:1&password=secret": `unknown parameter "password"`,
		"s3://Bad_Bucket/p":                          "bucket",
		"s3://bucket/a/../b":                         `prefix "a/../b"`,
		"s3://bucket/p?endpoint=h:1&x=1":             `unknown parameter "x"`,
		"s3://bucket/p?secure=maybe":                 `secure="maybe"`,
		"s3://bucket/p?partsize=1MiB":                "between 5MiB and 5GiB",
		"s3://bucket/p?partsize=lots":                "between 5MiB and 5GiB",
		"http://bucket/p":                            "not an s3:// URL",
		"s3://bucket/p?partsize=99999MiB":            "between 5MiB and 5GiB",
		"s3://bucket/p?idletimeout=30":               `idletimeout="30": want a duration above zero`,
		"s3://bucket/p?idletimeout=0s":               `idletimeout="0s": want a duration above zero`,
	} {
		_, err := parseS3URL(rawURL)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error with %q", rawURL, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the secret: %v", rawURL, err)
		}
	}
}

func TestS3String(t *testing.T) {
	for prefix, want := range map[string]string{"": "s3://b", "a/b/": "s3://b/a/b"} {
		if got := (&S3{bucket: "b", prefix: prefix}).String(); got != want {
			t.Errorf("prefix %q: %q, want %q", prefix, got, want)
		}
	}
}
