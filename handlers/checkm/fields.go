package checkm

import (
	"fmt"
	"strings"
)

// field is what a column means; fieldUnknown columns are read and ignored.
type field int

const (
	fieldUnknown field = iota
	fieldURL
	fieldHashAlg
	fieldHashValue
	fieldSize
	fieldModified
	fieldName
	fieldMime
	fieldPrimaryID
	fieldLocalID
	fieldCreator
	fieldTitle
	fieldDate
	fieldWhere
)

const (
	nfoNamespace = "http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#"
	mrtNamespace = "http://merritt.cdlib.org/terms#"
)

// knownFields maps lower-case namespace+localName to its meaning.
var knownFields = map[string]field{}

func init() {
	for local, f := range map[string]field{
		"fileUrl": fieldURL, "hashAlgorithm": fieldHashAlg, "hashValue": fieldHashValue,
		"fileSize": fieldSize, "fileLastModified": fieldModified, "fileName": fieldName,
	} {
		knownFields[strings.ToLower(nfoNamespace+local)] = f
	}
	for local, f := range map[string]field{
		"mimeType": fieldMime, "primaryIdentifier": fieldPrimaryID, "localIdentifier": fieldLocalID,
		"creator": fieldCreator, "title": fieldTitle, "date": fieldDate, "where": fieldWhere,
	} {
		knownFields[strings.ToLower(mrtNamespace+local)] = f
	}
}

// defaultFieldNames is the checkm column order used without #%fields.
var defaultFieldNames = []string{
	"nfo:fileUrl", "nfo:hashAlgorithm", "nfo:hashValue", "nfo:fileSize", "nfo:fileLastModified", "nfo:fileName",
}

// defaultPrefixes apply when a manifest uses mrt: or nfo: without declaring them.
var defaultPrefixes = map[string]string{"nfo:": nfoNamespace, "mrt:": mrtNamespace}

// resolveField tells what a column name means, given the manifest's
// declared prefixes (lower-case prefix with its colon → namespace URI).
func resolveField(name string, prefixes map[string]string) field {
	prefix, local, ok := strings.Cut(name, ":")
	if !ok { // a bare local name: try both vocabularies
		if f, ok := knownFields[strings.ToLower(nfoNamespace+name)]; ok {
			return f
		}
		return knownFields[strings.ToLower(mrtNamespace+name)]
	}
	prefix = strings.ToLower(prefix) + ":"
	if ns, ok := prefixes[prefix]; ok {
		return knownFields[strings.ToLower(ns+local)]
	}
	if ns, ok := defaultPrefixes[prefix]; ok {
		return knownFields[strings.ToLower(ns+local)]
	}
	return knownFields[strings.ToLower(name)] // perhaps a full URI
}

// columnMap resolves a #%fields list; every known field may appear once and
// the file URL must be there.
func columnMap(names []string, prefixes map[string]string) ([]field, error) {
	fields := make([]field, len(names))
	first := map[field]int{}
	for i, name := range names {
		if name == "" {
			return nil, fmt.Errorf("#%%fields: column %d has no name", i+1)
		}
		f := resolveField(name, prefixes)
		if f != fieldUnknown {
			if j, dup := first[f]; dup {
				return nil, fmt.Errorf("#%%fields: column %d (%s) repeats column %d (%s)", i+1, name, j+1, names[j])
			}
			first[f] = i
		}
		fields[i] = f
	}
	if _, ok := first[fieldURL]; !ok {
		return nil, fmt.Errorf("#%%fields: no nfo:fileUrl column")
	}
	return fields, nil
}

// splitColumns splits a data line on "|" into exactly n trimmed values, and
// tells how many the line has. Missing trailing columns are empty; extra
// ones must be empty too, since a value there means the columns do not line
// up with #%fields.
func splitColumns(line string, n int) (vals []string, given int, err error) {
	vals = make([]string, n)
	for rest, more := line, true; more; given++ {
		var col string
		col, rest, more = strings.Cut(rest, "|")
		col = strings.TrimSpace(col)
		switch {
		case given < n:
			vals[given] = col
		case col != "":
			return nil, 0, fmt.Errorf("column %d (%q) is beyond the %d named by #%%fields", given+1, truncate(col), n)
		}
	}
	return vals, given, nil
}

// truncate shortens a value quoted in an error so messages stay readable.
func truncate(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
