package handlers

import (
	"cmp"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ingestq/ingestq/handlers/internal/plainfile"
	"github.com/ingestq/ingestq/reactor/queue"
)

// What a job hands to the next consumer, as Handoff serves it under
// HandoffPrefix/<jid>/: the storage manifest (the store node's
// manifest_url, read by whoever works Storing), the files it lists, and
// the stored version (the inventory node's manifest_url, read by whoever
// works Recording).
const (
	HandoffPrefix     = "/work/"
	handoffStorage    = "storage-manifest"
	handoffFiles      = "files/"
	handoffInventory  = "inventory-manifest"
	maxCachedListings = 64
)

// handoffURL is the URL of a job's handoff document doc, or of one of its
// files (doc "files/<name>"), at the daemon's advertised address, with the
// hand-off's key; "" when the daemon serves none.
func (p *Pipeline) handoffURL(jid, key, doc string) string {
	if p.cfg.Advertise == "" {
		return ""
	}
	u := p.cfg.Advertise + HandoffPrefix + jid + "/" + doc
	if key != "" {
		u += "?" + handoffKeyParam + "=" + key // base32: nothing to escape
	}
	return u
}

// storeManifestURL is the store node's manifest_url: the served storage
// manifest, or without a server its file: URL.
func (p *Pipeline) storeManifestURL(j *queue.Job, key string) string {
	return cmp.Or(p.handoffURL(j.ID, key, handoffStorage), fileURL(filepath.Join(p.workDir(j), storageManifest)))
}

// inventoryManifestURL is the inventory node's manifest_url: the served
// stored version, or without a server the file: URL of its record.
func (p *Pipeline) inventoryManifestURL(j *queue.Job, key string) string {
	return cmp.Or(p.handoffURL(j.ID, key, handoffInventory), fileURL(filepath.Join(p.workDir(j), storedRecord)))
}

// Handoff serves, read-only and from each job's working folder, what a
// job hands to the next consumer, so that a program on another host can
// work Storing or Recording (another ingestq, or a program that reads
// these; Merritt's storage and inventory services read their own manifest
// formats and cannot):
//
//	GET /work/<jid>/storage-manifest?key=K    the storage manifest (checkm: URL, sha256, size, name of each file),
//	                                          each file's URL the next route
//	GET /work/<jid>/files/<name>?key=K        a file the storage manifest lists (Range requests work)
//	GET /work/<jid>/inventory-manifest?key=K  the stored version as JSON: ark, number, created,
//	                                          files (name, size, sha256), copies (target, url, number, verified)
//
// K is the hand-off's key. A request without the job's key is answered as
// one for a job that does not exist, and so is one for a job whose folder
// holds no hand-off here: the answer tells no one without the URL whether
// the job is there. A job id names a folder only once it is checked, and
// only the files the job's storage manifest lists are served, opened inside
// the job's folder (a symlink cannot lead out of it). Mount it at
// HandoffPrefix on the server that Config.Advertise names.
func (p *Pipeline) Handoff() http.Handler {
	h := &handoff{p: p, lists: map[string]*listing{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+HandoffPrefix+"{jid}/"+handoffStorage, h.storageManifest)
	mux.HandleFunc("GET "+HandoffPrefix+"{jid}/"+handoffFiles+"{name...}", h.file)
	mux.HandleFunc("GET "+HandoffPrefix+"{jid}/"+handoffInventory, h.inventoryManifest)
	return mux
}

type handoff struct {
	p *Pipeline

	mu    sync.Mutex
	lists map[string]*listing // jid → its storage manifest as last read
}

// listing is a job's storage manifest, kept while its file is unchanged:
// a consumer fetching an object's thousands of files one by one does not
// make the daemon read the whole list for each.
type listing struct {
	dir     string // the job's working folder
	key     string // its hand-off's key, which a new folder's manifest changes with
	mod     time.Time
	size    int64
	entries []manifestEntry
	byName  map[string]manifestEntry
}

var jobIDRE = regexp.MustCompile(`^jid[0-9]+$`)

// jobDir is the working folder of the request's job on this host, as the
// job (read from ZooKeeper) says, and its hand-off's key; false (with the
// answer written) when the id is not a job's, the folder holds no
// hand-off, or the request has not its key.
func (h *handoff) jobDir(w http.ResponseWriter, r *http.Request) (jid, dir, key string, ok bool) {
	jid = r.PathValue("jid")
	if !jobIDRE.MatchString(jid) {
		http.Error(w, "not a job id", http.StatusNotFound)
		return "", "", "", false
	}
	j, err := h.p.q.LoadJob(r.Context(), jid)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		noJob(w, jid)
		return "", "", "", false
	case err != nil:
		h.p.log.Warn("handoff: cannot read the job", "job", jid, "err", err)
		http.Error(w, "job "+jid+": the queue cannot be read now; try again", http.StatusServiceUnavailable)
		return "", "", "", false
	}
	dir = h.p.workDir(j)
	key, err = readHandoffKey(dir)
	switch {
	case errors.Is(err, errNoHandoff):
		noJob(w, jid)
		return "", "", "", false
	case err != nil:
		h.fail(w, jid, "hand-off key", err)
		return "", "", "", false
	case !keyGiven(r, key):
		noJob(w, jid)
		return "", "", "", false
	}
	return jid, dir, key, true
}

// noJob is the answer for a job that does not exist, and for a request
// without the key of one that does. The route counts it among its 404s
// (ingestq_http_requests_total), as the API counts a refused token, and it
// is not logged.
func noJob(w http.ResponseWriter, jid string) {
	http.Error(w, "no job "+jid, http.StatusNotFound)
}

// listing reads the storage manifest of the request's job, or answers why
// not. A job whose listing is kept is not read from ZooKeeper again while
// its manifest is unchanged.
func (h *handoff) listing(w http.ResponseWriter, r *http.Request) (jid, dir string, l *listing, ok bool) {
	jid = r.PathValue("jid")
	h.mu.Lock()
	l = h.lists[jid]
	h.mu.Unlock()
	if l != nil {
		if st, err := os.Stat(filepath.Join(l.dir, storageManifest)); err == nil && l.mod.Equal(st.ModTime()) && l.size == st.Size() {
			if !keyGiven(r, l.key) {
				noJob(w, jid)
				return "", "", nil, false
			}
			return jid, l.dir, l, true
		}
	}
	jid, dir, key, ok := h.jobDir(w, r)
	if !ok {
		return "", "", nil, false
	}
	path := filepath.Join(dir, storageManifest)
	st, err := os.Stat(path)
	if err != nil {
		h.fail(w, jid, "storage manifest", err)
		return "", "", nil, false
	}
	entries, err := readStorageManifest(path)
	if err != nil {
		h.fail(w, jid, "storage manifest", err)
		return "", "", nil, false
	}
	l = &listing{dir: dir, key: key, mod: st.ModTime(), size: st.Size(), entries: entries, byName: map[string]manifestEntry{}}
	for _, e := range entries {
		l.byName[e.Name] = e
	}
	h.mu.Lock()
	if len(h.lists) >= maxCachedListings {
		clear(h.lists) // jobs move on: the ones asked for again are read again
	}
	h.lists[jid] = l
	h.mu.Unlock()
	return jid, dir, l, true
}

func (h *handoff) storageManifest(w http.ResponseWriter, r *http.Request) {
	jid, _, l, ok := h.listing(w, r)
	if !ok {
		return
	}
	data, err := storageManifestText(l.entries, func(e manifestEntry) string {
		return cmp.Or(h.p.handoffURL(jid, l.key, handoffFiles+escapePath(e.Name)), fileURL(e.Path))
	})
	if err != nil {
		h.fail(w, jid, "storage manifest", err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(data)
}

func (h *handoff) file(w http.ResponseWriter, r *http.Request) {
	jid, dir, l, ok := h.listing(w, r)
	if !ok {
		return
	}
	e, listed := l.byName[r.PathValue("name")]
	if !listed {
		http.Error(w, "job "+jid+": no such file in its storage manifest", http.StatusNotFound)
		return
	}
	f, st, err := plainfile.OpenIn(dir, filepath.FromSlash(e.Name))
	if errors.Is(err, plainfile.ErrNotPlain) {
		err = fs.ErrNotExist
	}
	if err != nil {
		h.fail(w, jid, e.Name, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", st.ModTime(), f)
}

func (h *handoff) inventoryManifest(w http.ResponseWriter, r *http.Request) {
	jid, dir, _, ok := h.jobDir(w, r)
	if !ok {
		return
	}
	data, err := plainfile.Read(filepath.Join(dir, storedRecord), -1)
	var kept storedVersion
	if err == nil {
		if err = json.Unmarshal(data, &kept); err == nil && kept.ARK == "" {
			err = errors.New("no ARK in the stored version's record")
		}
	}
	if err != nil {
		h.fail(w, jid, "stored version", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(kept)
}

// fail answers 404 for what is not there (not yet, or no longer: Notify
// removes the working folder), 500 for anything else, which is logged.
func (h *handoff) fail(w http.ResponseWriter, jid, what string, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "job "+jid+": no "+what+" here", http.StatusNotFound)
		return
	}
	h.p.log.Warn("handoff: cannot serve", "job", jid, "what", what, "err", err)
	http.Error(w, "job "+jid+": "+what+" unreadable", http.StatusInternalServerError)
}

// escapePath escapes each segment of a slash-separated name for a URL path.
func escapePath(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
