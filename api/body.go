package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// bodyError is the 400 for a body that did not decode into v: it names
// the JSON field (its path, as "filter.stalled" or "jids[0]"), what was
// given and what is wanted, in JSON's words, never the server's types.
func bodyError(err error, data []byte, v any) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		kind, _, _ := strings.Cut(te.Value, " ") // "number 1.5": a number, not of the wanted kind
		path, given := givenAt(data, te.Field, kind)
		if path == "" {
			path = "the body"
		}
		// te.Type is the member's type when a member is wrong.
		return badRequest("%s: given %s; want %s", path, given, want(te.Type))
	case errors.As(err, &se):
		return badRequest("malformed JSON body at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON body: it ends before its value does")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return badRequest("unknown field %s: want one of %s", name, strings.Join(fieldNames(reflect.TypeOf(v)), ", "))
	}
	return badRequest("malformed JSON body: %v", strings.TrimPrefix(err.Error(), "json: "))
}

// givenAt finds what the body holds at path (a.b): the value of kind
// there, or, when that is an object or array (the decoder names only
// it), its first member of kind, with that member's path. It describes
// the value as given.
func givenAt(data []byte, path, kind string) (string, string) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil {
		return path, "a " + kind
	}
	if path != "" {
		for _, key := range strings.Split(path, ".") {
			m, _ := x.(map[string]any)
			x = m[key]
		}
	}
	if kindOf(x) == kind {
		return path, givenText(x)
	}
	switch c := x.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(c)) {
			if kindOf(c[k]) == kind {
				return path + "." + k, givenText(c[k])
			}
		}
	case []any:
		for i, m := range c {
			if kindOf(m) == kind {
				return path + "[" + strconv.Itoa(i) + "]", givenText(m)
			}
		}
	}
	return path, "a " + kind
}

// kindOf is a decoded JSON value's kind, as the decoder's errors name it.
func kindOf(x any) string {
	switch x.(type) {
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// givenText says what a value given is: a scalar as written, with its kind
// when it is a string.
func givenText(x any) string {
	switch x := x.(type) {
	case string:
		if len(x) > 60 {
			x = x[:60] + "…"
		}
		return strconv.Quote(x) + " (a string)"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprint(x)
}

// want says in JSON's words what a value of t is.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return want(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array, each item " + want(t.Elem())
	case reflect.Map:
		return "an object, each member " + want(t.Elem())
	}
	return "an object"
}

// fieldNames are the JSON names of struct type t's fields.
func fieldNames(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
