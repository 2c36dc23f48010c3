package metrics

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Handler serves /metrics: what gatherer gathers (a registry New
// registered on) plus the per-workload families of current(), which New
// leaves out of the registry.
//
// Why not a Collector: with 10,000 workloads a scrape is ~90,000 series,
// and client_golang turns each into a dto.Metric, sorts every family and
// encodes them again, several times the work of writing them. The snapshot is immutable and already holds every number, so the
// text format (what Prometheus negotiates unless it asks for protobuf) is
// written straight from it, streamed, in the order and bytes the registry
// would produce, and gzip runs at BestSpeed. Every other format (protobuf,
// a name[] filter) goes through promhttp with the same series.
//
// opts are promhttp's; the fast path honours MaxRequestsInFlight,
// ErrorLog and ErrorHandling (ContinueOnError and HTTPErrorOnError alike:
// a gather error with families gathered is logged and the scrape goes on
// only for ContinueOnError). It has no Timeout: nothing on it waits.
func Handler(gatherer prometheus.Gatherer, current snapshot.Acquirer, opts promhttp.HandlerOpts) http.Handler {
	wreg := prometheus.NewRegistry()
	wreg.MustRegister(newCollector(current, onlyWorkloads))
	h := &handler{
		gatherer: gatherer, current: current, opts: opts,
		slow: promhttp.HandlerFor(prometheus.Gatherers{gatherer, wreg}, opts),
	}
	if opts.MaxRequestsInFlight > 0 {
		h.inFlight = make(chan struct{}, opts.MaxRequestsInFlight)
	}
	return h
}

type handler struct {
	gatherer prometheus.Gatherer
	current  snapshot.Acquirer
	opts     promhttp.HandlerOpts
	slow     http.Handler
	inFlight chan struct{}
}

// Writers reused across scrapes: a scrape of 10,000 workloads would
// otherwise allocate gzip's ~800 KB of state each time.
var (
	bufPool  = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}
	gzipPool = sync.Pool{New: func() any {
		zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // the level is valid
		return zw
	}}
)

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := expfmt.NegotiateAccept(r.Header, h.acceptedFormats()...)
	if format.FormatType() != expfmt.TypeTextPlain || r.URL.Query().Has("name[]") || h.opts.DisableCompression {
		h.slow.ServeHTTP(w, r)
		return
	}
	if h.inFlight != nil {
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
		default:
			http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.",
				h.opts.MaxRequestsInFlight), http.StatusServiceUnavailable)
			return
		}
	}
	mfs, err := h.gatherer.Gather()
	if err != nil {
		h.logf("error gathering metrics: %v", err)
		switch {
		case h.opts.ErrorHandling == promhttp.PanicOnError:
			panic(err)
		case h.opts.ErrorHandling == promhttp.HTTPErrorOnError || len(mfs) == 0:
			http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	hdr := w.Header()
	hdr.Add("Vary", "Accept")
	hdr.Add("Vary", "Accept-Encoding")
	hdr.Set("Content-Type", string(format))
	var out io.Writer = w
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		hdr.Set("Content-Encoding", "gzip")
		zw := gzipPool.Get().(*gzip.Writer)
		zw.Reset(w)
		defer func() {
			if err := zw.Close(); err != nil {
				h.logf("error sending metrics: %v", err)
			}
			gzipPool.Put(zw)
		}()
		out = zw
	}
	bw := bufPool.Get().(*bufio.Writer)
	bw.Reset(out)
	defer func() {
		bw.Reset(nil)
		bufPool.Put(bw)
	}()
	snap, release := h.current()
	defer release()
	if err := writeText(bw, format, mfs, snap); err != nil {
		h.logf("error encoding and sending metrics: %v", err)
		return
	}
	if err := bw.Flush(); err != nil {
		h.logf("error sending metrics: %v", err)
	}
}

func (h *handler) acceptedFormats() []expfmt.Format {
	switch {
	case len(h.opts.AcceptedFormats) > 0:
		return h.opts.AcceptedFormats
	case h.opts.EnableOpenMetrics:
		return expfmt.DefaultOpenMetricsAcceptedFormats()
	}
	return expfmt.DefaultAcceptedFormats()
}

func (h *handler) logf(format string, args ...any) {
	if h.opts.ErrorLog != nil {
		h.opts.ErrorLog.Println(fmt.Sprintf(format, args...))
	}
}

// acceptsGzip reports whether an Accept-Encoding header names gzip with
// a q-value above zero. "*" alone gets no compression, as from promhttp
// (identity is its first offer).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		for p := range strings.SplitSeq(params, ";") {
			k, v, found := strings.Cut(strings.TrimSpace(p), "=")
			if found && strings.EqualFold(strings.TrimSpace(k), "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return err == nil && q > 0
			}
		}
		return true
	}
	return false
}

// writeText writes the families gathered and the snapshot's per-workload
// families in the text format, all sorted by name as the registry sorts
// them: each workload family goes in just before the first gathered
// family whose name sorts after its own.
func writeText(w *bufio.Writer, format expfmt.Format, mfs []*dto.MetricFamily, snap *snapshot.Snapshot) error {
	enc := expfmt.NewEncoder(w, format)
	var wt *workloadText
	if snap != nil && len(snap.Workloads) > 0 {
		wt = newWorkloadText(snap)
	}
	next := 0 // the next workload family to write
	flush := func(before string) {
		for ; wt != nil && next < len(wt.families) && (before == "" || wt.families[next].name < before); next++ {
			wt.families[next].write(w)
		}
	}
	for _, mf := range mfs {
		flush(mf.GetName())
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	flush("")
	return nil
}

// workloadFamilies are the per-workload families in name order, each
// with its samples of one workload.
var workloadFamilies = [...]struct {
	name, help, typ string
	psi             bool // only written when a workload has PSI
	write           func(w *bufio.Writer, name string, wl *snapshot.Workload, id, wlName string)
}{
	{namespace + "_workload_io_bytes_total", helpWlBytes, "counter", false, func(w *bufio.Writer, n string, wl *snapshot.Workload, id, name string) {
		writeSample(w, n, id, name, labelOperation, "read", float64(wl.ReadBytes))
		writeSample(w, n, id, name, labelOperation, "write", float64(wl.WriteBytes))
	}},
	{namespace + "_workload_io_operations_total", helpWlIOs, "counter", false, func(w *bufio.Writer, n string, wl *snapshot.Workload, id, name string) {
		writeSample(w, n, id, name, labelOperation, "read", float64(wl.ReadIOs))
		writeSample(w, n, id, name, labelOperation, "write", float64(wl.WriteIOs))
	}},
	{namespace + "_workload_level", helpWlLevel, "gauge", false, func(w *bufio.Writer, n string, wl *snapshot.Workload, id, name string) {
		writeSample(w, n, id, name, "", "", float64(wl.Level))
	}},
	{namespace + "_workload_level_used_bytes", helpWlInLevel, "gauge", false, func(w *bufio.Writer, n string, wl *snapshot.Workload, id, name string) {
		writeSample(w, n, id, name, "", "", float64(wl.BytesInLevel))
	}},
	{namespace + "_workload_pressure_io_stalled_seconds_total", helpWlStalled, "counter", true, func(w *bufio.Writer, n string, wl *snapshot.Workload, id, name string) {
		if p := wl.Pressure; p != nil {
			writeSample(w, n, id, name, "", "", usToSeconds(p.FullTotal))
		}
	}},
	{namespace + "_workload_pressure_io_waiting_seconds_total", helpWlWaiting, "counter", true, func(w *bufio.Writer, n string, wl *snapshot.Workload, id, name string) {
		if p := wl.Pressure; p != nil {
			writeSample(w, n, id, name, "", "", usToSeconds(p.SomeTotal))
		}
	}},
	{namespace + "_workload_weight", helpWlWeight, "gauge", false, func(w *bufio.Writer, n string, wl *snapshot.Workload, id, name string) {
		writeSample(w, n, id, name, "", "", float64(wl.Weight))
	}},
}

// workloadText writes the per-workload families of one snapshot.
// Workloads are in ID, then name order (the registry's order: it sorts by
// label values); a workload with the same ID and name as the one before
// would be a duplicate series and is left out, as the registry leaves it
// out. Write errors stick in w (bufio) and are returned by its Flush.
type workloadText struct {
	snap       *snapshot.Snapshot
	order      []int32
	ids, names []string
	families   []textFamily // in name order; only those with series
}

// textFamily is one family to write.
type textFamily struct {
	name  string
	write func(w *bufio.Writer)
}

func newWorkloadText(snap *snapshot.Snapshot) *workloadText {
	wt := &workloadText{snap: snap, order: idOrder(snap),
		ids: make([]string, len(snap.Workloads)), names: make([]string, len(snap.Workloads))}
	for i := range snap.Workloads {
		wt.ids[i], wt.names[i] = validUTF8(snap.Workloads[i].ID), validUTF8(snap.Workloads[i].Name)
	}
	if caps := wt.caps(); len(caps) > 0 {
		wt.families = append(wt.families, textFamily{capFamily, func(w *bufio.Writer) { writeCaps(w, caps) }})
	}
	psi := anyPressure(snap)
	for _, f := range workloadFamilies {
		if f.psi && !psi {
			continue // no series: no family, as the registry does
		}
		wt.families = append(wt.families, textFamily{f.name, func(w *bufio.Writer) {
			writeHead(w, f.name, f.help, f.typ)
			wt.each(func(wl *snapshot.Workload, id, name string) { f.write(w, f.name, wl, id, name) })
		}})
	}
	return wt
}

// each calls fn for every workload in order, duplicates left out.
func (wt *workloadText) each(fn func(wl *snapshot.Workload, id, name string)) {
	prev := -1
	for _, i := range wt.order {
		if prev >= 0 && wt.ids[i] == wt.ids[prev] && wt.names[i] == wt.names[prev] {
			continue
		}
		prev = int(i)
		fn(wt.snap.Workloads[i], wt.ids[i], wt.names[i])
	}
}

// capFamily is the per-workload caps' family (capsOf says which
// workloads carry it).
const capFamily = namespace + "_workload_cap_bytes_per_second"

// capSample is one series of the caps' family.
type capSample struct {
	id, name string
	workloadCap
}

// caps is every workload's caps in the registry's order: by label values
// in the order of the label names (device, id, name, operation).
func (wt *workloadText) caps() []capSample {
	var out []capSample
	wt.each(func(wl *snapshot.Workload, id, name string) {
		for _, c := range capsOf(wl) {
			out = append(out, capSample{id, name, c})
		}
	})
	slices.SortStableFunc(out, func(a, b capSample) int { return strings.Compare(a.device, b.device) })
	return out
}

func writeCaps(w *bufio.Writer, caps []capSample) {
	writeHead(w, capFamily, helpWlCap, "gauge")
	for _, c := range caps {
		w.WriteString(capFamily)
		w.WriteString(`{device="`)
		writeEscaped(w, c.device, true)
		w.WriteString(`",id="`)
		writeEscaped(w, c.id, true)
		w.WriteString(`",name="`)
		writeEscaped(w, c.name, true)
		w.WriteString(`",operation="`)
		w.WriteString(c.op)
		w.WriteString(`"} `)
		writeFloat(w, float64(c.bps))
		w.WriteByte('\n')
	}
}

// writeHead writes a family's HELP and TYPE lines.
func writeHead(w *bufio.Writer, name, help, typ string) {
	w.WriteString("# HELP ")
	w.WriteString(name)
	w.WriteByte(' ')
	writeEscaped(w, help, false)
	w.WriteString("\n# TYPE ")
	w.WriteString(name)
	w.WriteByte(' ')
	w.WriteString(typ)
	w.WriteByte('\n')
}

func anyPressure(s *snapshot.Snapshot) bool {
	for i := range s.Workloads {
		if s.Workloads[i].Pressure != nil {
			return true
		}
	}
	return false
}

// writeSample writes `name{id="..",name=".."[,k="v"]} value`.
func writeSample(w *bufio.Writer, metric, id, name, k, v string, value float64) {
	w.WriteString(metric)
	w.WriteString(`{id="`)
	writeEscaped(w, id, true)
	w.WriteString(`",name="`)
	writeEscaped(w, name, true)
	if k != "" {
		w.WriteString(`",`)
		w.WriteString(k)
		w.WriteString(`="`)
		w.WriteString(v)
	}
	w.WriteString(`"} `)
	writeFloat(w, value)
	w.WriteByte('\n')
}

// writeFloat formats v as expfmt's text encoder does.
func writeFloat(w *bufio.Writer, v float64) {
	switch {
	case math.IsNaN(v):
		w.WriteString("NaN")
	case math.IsInf(v, +1):
		w.WriteString("+Inf")
	case math.IsInf(v, -1):
		w.WriteString("-Inf")
	default:
		w.Write(strconv.AppendFloat(w.AvailableBuffer(), v, 'g', -1, 64))
	}
}

// writeEscaped writes s escaped as the text format wants: backslash and
// newline always, the double quote in label values.
func writeEscaped(w *bufio.Writer, s string, quote bool) {
	if !strings.ContainsAny(s, "\\\n\"") {
		w.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			w.WriteString(`\\`)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '"' && quote:
			w.WriteString(`\"`)
		default:
			w.WriteByte(c)
		}
	}
}
