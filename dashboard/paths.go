package dashboard

import (
	"bytes"
	"slices"

	"golang.org/x/net/html"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/internal/serverpath"
)

// hidePaths hides the server's paths in a page for a caller below admin,
// by the API's rule (package serverpath), in the page's text and its
// attributes' values. The page is read as HTML, not as bytes: its values
// are escaped (a quote is &#39;), which the rule would cut in two. The
// dashboard's links (/ui/…), the API's requests named in advice, and the
// nodes of the queue at root stay.
func hidePaths(page []byte, root string) []byte {
	hide := func(s string) string {
		return string(serverpath.Hide([]byte(s), root, Prefix, api.Prefix))
	}
	z := html.NewTokenizer(bytes.NewReader(page))
	var out bytes.Buffer
	for {
		switch z.Next() {
		case html.ErrorToken: // the page's end: html/template wrote it whole
			return out.Bytes()
		case html.TextToken:
			text := html.UnescapeString(string(z.Raw()))
			if h := hide(text); h != text {
				out.WriteString(html.EscapeString(h))
				continue
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			raw := slices.Clone(z.Raw())
			tok := z.Token()
			changed := false
			for i, a := range tok.Attr {
				if h := hide(a.Val); h != a.Val {
					tok.Attr[i].Val, changed = h, true
				}
			}
			if changed { // written again only then: the tokenizer lower-cases names (SVG's viewBox)
				out.WriteString(tok.String())
				continue
			}
			out.Write(raw)
			continue
		}
		out.Write(z.Raw())
	}
}
