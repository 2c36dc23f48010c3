package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddiskqos/ddiskqos/internal/buildinfo"
)

// RegisterBuildInfo registers ddiskqos_build_info{version,revision,goversion},
// always 1: which build is running, the Prometheus convention for joining
// it onto other series (prometheus_build_info, node_exporter_build_info).
//
// Written here rather than taken from client_golang's
// collectors/version, which reads prometheus/common/version: that takes
// the version from -ldflags only (empty for a go build or go install,
// whose module version Go records) and adds branch and tags labels that
// nothing here sets.
func RegisterBuildInfo(reg prometheus.Registerer, bi buildinfo.Info) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace,
		Name:      "build_info",
		Help:      "A metric with a constant '1' value labeled by the version, revision and Go version ddiskqos was built from.",
		ConstLabels: prometheus.Labels{
			"version":   bi.Version,
			"revision":  bi.RevisionLabel(),
			"goversion": bi.GoVersion,
		},
	}, func() float64 { return 1 }))
}
