package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress is what a waiting submit's progress line shows.
type progress struct {
	finished, failed, total int       // jobs: finished (failed included), failed, all (-1 until counted)
	bytes, bytesTotal       int64     // downloaded so far; the estimate, a failed job's at what it downloaded (0 = unknown)
	rate                    float64   // bytes per second while downloading (0 = unknown)
	busy                    int       // unfinished jobs waiting for a busy server
	nextTry                 time.Time // the latest of their next tries (zero = not said)
	at                      time.Time // when these numbers were taken
}

// text renders the numbers: "2/4 jobs finished (1 completed, 1 failed),
// 3.0 MiB of 8.0 MiB downloaded, 1.0 MiB/s, ETA 5s", and on a terminal a bar
// before them: # completed, x failed, - still to go.
func (n progress) text(bid string, tty bool) string {
	s := n.jobs()
	if n.bytes > 0 {
		s += ", " + humanBytes(n.bytes)
		if n.bytesTotal > 0 {
			s += " of " + humanBytes(n.bytesTotal)
		}
		s += " downloaded"
		if n.rate > 0 {
			s += ", " + humanBytes(int64(n.rate)) + "/s"
		}
	}
	if eta := n.eta(); eta != "" {
		s += ", " + eta
	}
	if !tty {
		return bid + ": " + s
	}
	return n.bar(20) + " " + s
}

// eta is the time the bytes left take at the rate ("ETA 5s"), unless jobs
// wait for a busy server and it would end before their latest next try,
// or none is left to download, or every unfinished job waits: then that
// they wait, and until when ("ETA after 05:41:37: 1 job waits for a busy
// server"). The bytes alone said "ETA 0s" for as long as the last job
// waited, an hour at most. "" when nothing is known.
func (n progress) eta() string {
	var left time.Duration
	if n.rate > 0 && n.bytesTotal > n.bytes {
		left = (time.Duration(float64(n.bytesTotal-n.bytes)/n.rate) * time.Second).Round(time.Second)
	}
	if n.busy > 0 && (left == 0 || n.busy >= n.total-n.finished || n.at.Add(left).Before(n.nextTry)) {
		when, verb := "ETA after "+n.nextTry.Local().Format(time.TimeOnly), "wait"
		if n.nextTry.IsZero() {
			when = "ETA unknown"
		}
		if n.busy == 1 {
			verb = "waits"
		}
		return fmt.Sprintf("%s: %s %s for a busy server", when, plural(n.busy, "job"), verb)
	}
	if left > 0 {
		return "ETA " + left.String()
	}
	return ""
}

// jobs is "2/4 jobs finished (1 completed, 1 failed)"; "?" while the total
// is unknown.
func (n progress) jobs() string {
	of := "?"
	if n.total >= 0 {
		of = fmt.Sprint(n.total)
	}
	return fmt.Sprintf("%d/%s jobs finished (%d completed, %d failed)", n.finished, of, n.finished-n.failed, n.failed)
}

// bar is "[###x----]": a failure shows as at least one x, so a batch with
// failures never looks all done.
func (n progress) bar(width int) string {
	var done, bad int
	if n.total > 0 {
		bad = n.failed * width / n.total
		if n.failed > 0 {
			bad = max(bad, 1)
		}
		done = max(0, min(width, n.finished*width/n.total)-bad)
	}
	return "[" + strings.Repeat("#", done) + strings.Repeat("x", bad) + strings.Repeat("-", width-done-bad) + "]"
}

// progressLine draws a waiting submit's progress on stderr: on a terminal
// one line redrawn in place, otherwise a plain line at each tenth of the way
// and at most every progressStep in between.
//
// It is also the log's writer while it runs: on a terminal, a log line or
// warning clears the progress line, goes on its own line, and the progress
// line is drawn again below it.
type progressLine struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	bid    string
	last   time.Time // of the last line or redraw
	decile int       // of the last line (not a terminal)
	shown  string    // the text on the terminal's line, when open
	open   bool      // a terminal line without its newline
	// cols gives the terminal's width (0: unknown): a line drawn wider
	// wraps, and "\r" then goes back to its last row alone, leaving the
	// rows above on the screen at each redraw.
	cols func() int
}

// eraseLine is the terminal's "erase to the end of the line".
const eraseLine = "\x1b[K"

func newProgressLine(w io.Writer, tty bool, bid string) *progressLine {
	return &progressLine{w: w, tty: tty, bid: bid, decile: -1, last: time.Now(), cols: func() int { return termWidth(w) }}
}

// Write puts other output on lines of its own (see progressLine).
func (p *progressLine) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.open {
		return p.w.Write(b)
	}
	_, _ = io.WriteString(p.w, "\r"+eraseLine)
	n, err := p.w.Write(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		_, _ = io.WriteString(p.w, "\n")
	}
	_, _ = io.WriteString(p.w, p.shown)
	return n, err
}

func (p *progressLine) update(n progress, now time.Time, force bool) {
	if p.tty {
		p.draw(n.text(p.bid, true), now, force)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	text := n.text(p.bid, false)
	if text == p.shown {
		return
	}
	decile := -1
	if n.total > 0 {
		decile = n.finished * 10 / n.total
	} else if n.total == 0 {
		decile = 10
	}
	if force || decile > p.decile || now.Sub(p.last) >= progressStep {
		fmt.Fprintln(p.w, text)
		p.decile, p.shown, p.last = max(p.decile, decile), text, now
	}
}

// draw shows text as the terminal's line, cut to its width, at most every
// progressTick unless force: submit's, and the audit's.
func (p *progressLine) draw(text string, now time.Time, force bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !force && now.Sub(p.last) < progressTick {
		return
	}
	if cols := p.cols(); cols > 1 { // asked at each draw: the terminal may be resized
		text = truncate(text, cols-1) // the last column left free: a line that fills it wraps on some terminals
	}
	if text == p.shown {
		return
	}
	fmt.Fprintf(p.w, "\r%s%s", text, eraseLine)
	p.open, p.shown, p.last = true, text, now
}

// endWith puts text, whole, in the place of a terminal's progress line,
// and finishes it: a command's last line.
func (p *progressLine) endWith(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		_, _ = io.WriteString(p.w, "\r"+eraseLine)
	}
	_, _ = io.WriteString(p.w, text+"\n")
	p.open, p.shown = false, ""
}

// end finishes a terminal's progress line.
func (p *progressLine) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		fmt.Fprintln(p.w)
		p.open, p.shown = false, ""
	}
}

// divert sends what is written to g to w instead, until restore is called.
func (g *gate) divert(w io.Writer) (restore func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.w
	g.w = w
	return func() {
		g.mu.Lock()
		g.w = prev
		g.mu.Unlock()
	}
}

// humanBytes writes n with a binary unit: 512 B, 1.5 KiB, 3.2 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
