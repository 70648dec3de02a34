package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"oengine/server"
	"oengine/server/kvzmq"
)

// distFlags are the serve flags for running under a distributed serving
// system (docs/deploy.md): vLLM-named metrics for llm-d's endpoint picker
// and the ZMQ KV event publisher for its precise prefix-cache scorer.
type distFlags struct {
	metricsCompat string
	zmqEndpoint   string
	zmqTopic      string
	zmqConnect    bool
	zmqPublic     bool
}

func addDistFlags(fs *flag.FlagSet) *distFlags {
	d := &distFlags{}
	fs.StringVar(&d.metricsCompat, "metrics-compat", "", "also export metrics under another engine's names: `vllm` (vllm:num_requests_waiting, ... for llm-d's endpoint picker); empty: oengine: names only")
	fs.StringVar(&d.zmqEndpoint, "kv-events-zmq", "", "publish KV events on a ZeroMQ PUB socket bound to `tcp://HOST:PORT` (HOST * for every interface) in vLLM's msgpack KVEventBatch format, for llm-d; empty: off")
	fs.StringVar(&d.zmqTopic, "kv-events-zmq-topic", "", "`topic` of the ZMQ KV events (default: kv@HOST:PORT@MODEL with the advertised host, the HTTP port and the served model name, llm-d's form)")
	fs.BoolVar(&d.zmqPublic, "kv-events-zmq-public", false, "allow binding --kv-events-zmq on an address other hosts can reach: the feed has no authentication and carries the token ids of every prompt (docs/design.md §8 keeps KV events admin-only), so keep its port on a private network")
	fs.BoolVar(&d.zmqConnect, "kv-events-zmq-connect", false, "dial --kv-events-zmq instead of binding it (a central subscriber that binds, llm-d's centralised mode); the feed is then not advertised in GetKvEventSources")
	return d
}

// check validates the flags after parsing.
func (d *distFlags) check() error {
	switch d.metricsCompat {
	case "", "vllm":
	default:
		return fmt.Errorf("serve: --metrics-compat must be vllm or empty, got %q", d.metricsCompat)
	}
	if d.zmqEndpoint == "" {
		if d.zmqTopic != "" || d.zmqConnect {
			return fmt.Errorf("serve: --kv-events-zmq-topic and --kv-events-zmq-connect need --kv-events-zmq")
		}
		return nil
	}
	host, _, err := kvzmq.ParseEndpoint(d.zmqEndpoint)
	if err != nil {
		return fmt.Errorf("serve: --kv-events-zmq: %w", err)
	}
	if !d.zmqConnect && !d.zmqPublic && !loopbackHost(host) {
		return fmt.Errorf("serve: --kv-events-zmq %s would let any host read the token ids of every prompt (the ZMQ feed has no authentication): bind 127.0.0.1, or pass --kv-events-zmq-public on a private network", d.zmqEndpoint)
	}
	return nil
}

// loopbackHost reports a bind host only this machine can reach.
func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// apply enables what the flags ask for on a built server (before Listen).
func (d *distFlags) apply(srv *server.Server) error {
	if d.metricsCompat == "vllm" {
		if err := srv.EnableVLLMMetrics(); err != nil {
			return fmt.Errorf("serve: --metrics-compat vllm: %w", err)
		}
	}
	return nil
}

// start runs the ZMQ publisher on the default model's KV cache (after
// Listen, so the default topic can name the HTTP port) and advertises it;
// the returned function stops it.
func (d *distFlags) start(srv *server.Server, logger *slog.Logger) (func(), error) {
	if d.zmqEndpoint == "" {
		return func() {}, nil
	}
	m := srv.Models()[0]
	topic := d.zmqTopic
	if topic == "" {
		topic = defaultZMQTopic(srv.AdvertisedHost(), srv.HTTPAddr(), m.Name)
	}
	p, err := kvzmq.Start(kvzmq.Config{Endpoint: d.zmqEndpoint, Connect: d.zmqConnect, Topic: topic, Logger: logger},
		m.Backend.SubscribeKV)
	if err != nil {
		return nil, fmt.Errorf("serve: --kv-events-zmq: %w", err)
	}
	if !d.zmqConnect {
		host, _, _ := kvzmq.ParseEndpoint(d.zmqEndpoint)
		srv.AddKvEventSource(server.KvSource{Transport: "zmq", Encoding: "msgpack", Protocol: "tcp",
			Host: host, Port: uint32(p.Port()), Topic: topic, HWM: 100000})
	}
	logger.Info("KV events published over ZMQ", "endpoint", d.zmqEndpoint, "port", p.Port(), "topic", topic, "connect", d.zmqConnect)
	return func() { _ = p.Close() }, nil
}

// defaultZMQTopic is llm-d's topic form kv@HOST:PORT@MODEL: the advertised
// host, the HTTP listener's port (absent when there is none) and the
// served model name.
func defaultZMQTopic(host, httpAddr, model string) string {
	id := host
	if _, port, err := net.SplitHostPort(httpAddr); err == nil {
		if n, err := strconv.Atoi(port); err == nil && n > 0 {
			id = net.JoinHostPort(host, port)
		}
	}
	return "kv@" + id + "@" + model
}
