package api

import (
	_ "embed" // openapi.json
	"net/http"
)

// openAPI is the OpenAPI 3 document of the API, written by hand; a test
// checks that it describes every route and no other.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3 document.
func OpenAPI() []byte { return openAPI }

func serveOpenAPI(w http.ResponseWriter, r *http.Request, _ Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
	return nil
}
