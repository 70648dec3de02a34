package kvzmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"oengine/kvcache"
)

// Subscribe opens the KV cache's event feed (server.Backend.SubscribeKV,
// kvcache.Cache.Subscribe).
type Subscribe func(fromSeq uint64, snapshot bool) (*kvcache.Subscription, error)

// Config configures a Publisher.
type Config struct {
	// Endpoint is tcp://HOST:PORT. The publisher binds it ("*" or an empty
	// host: every interface; port 0: any free port) unless Connect.
	Endpoint string
	// Connect dials Endpoint instead of binding it (a central subscriber
	// that binds, as in llm-d's centralised mode).
	Connect bool
	// Topic is the first frame of every message (llm-d: kv@HOST:PORT@MODEL).
	Topic string
	// Rank is the data-parallel rank written in each batch.
	Rank uint32
	// HWM bounds the messages queued for sending; more are dropped (as a
	// ZeroMQ PUB socket does at its high-water mark). 0: 100000.
	HWM int
	// Logger; nil: slog.Default().
	Logger *slog.Logger
}

// Publisher sends every KV event batch of one cache as a three-frame
// message [topic, sequence (8 bytes big-endian), msgpack KVEventBatch].
// The sequence is the publisher's own, from 0 and one more per message
// (as vLLM's publisher counts), so it stays consecutive across a resume.
type Publisher struct {
	cfg    Config
	sock   zmq4.Socket
	sub    Subscribe
	cancel context.CancelFunc
	done   chan struct{}
	// beforePublish, when set (tests), runs before each batch is sent.
	beforePublish func(kvcache.Batch)

	mu        sync.Mutex // protects sent, lastCache
	sent      uint64     // messages published; the next message's sequence number
	lastCache uint64     // cache sequence number of the last batch published
}

// ParseEndpoint splits tcp://HOST:PORT.
func ParseEndpoint(ep string) (host string, port int, err error) {
	u, err := url.Parse(ep)
	if err != nil || u.Scheme != "tcp" || u.Host == "" || u.Path != "" {
		return "", 0, fmt.Errorf("kvzmq: endpoint %q is not tcp://HOST:PORT", ep)
	}
	h, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", 0, fmt.Errorf("kvzmq: endpoint %q: %w", ep, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("kvzmq: endpoint %q: bad port %q", ep, p)
	}
	return h, n, nil
}

// Start binds (or dials) the socket and publishes the batches of sub until
// Close or until the cache closes.
func Start(cfg Config, sub Subscribe) (*Publisher, error) { return start(cfg, sub, nil) }

func start(cfg Config, sub Subscribe, beforePublish func(kvcache.Batch)) (*Publisher, error) {
	if _, _, err := ParseEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HWM == 0 {
		cfg.HWM = 100000
	}
	ctx, cancel := context.WithCancel(context.Background())
	sock := zmq4.NewPub(ctx, zmq4.WithLogger(slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)))
	var err error
	if cfg.Connect {
		err = sock.Dial(cfg.Endpoint)
	} else {
		err = sock.Listen(cfg.Endpoint)
	}
	if err == nil {
		err = sock.SetOption(zmq4.OptionHWM, cfg.HWM)
	}
	if err != nil {
		sock.Close()
		cancel()
		return nil, fmt.Errorf("kvzmq: %w", err)
	}
	p := &Publisher{cfg: cfg, sock: sock, sub: sub, cancel: cancel, done: make(chan struct{}), beforePublish: beforePublish}
	s, err := sub(0, false)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("kvzmq: subscribe: %w", err)
	}
	go p.run(ctx, s)
	return p, nil
}

// Port is the bound TCP port (0 when dialing).
func (p *Publisher) Port() int {
	if a, ok := p.sock.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// Topic is the topic frame of every message.
func (p *Publisher) Topic() string { return p.cfg.Topic }

// Subscribers are the topics remote subscribers asked for (a SUB socket's
// subscription reaches the publisher after it connects).
func (p *Publisher) Subscribers() []string {
	if t, ok := p.sock.(zmq4.Topics); ok {
		return t.Topics()
	}
	return nil
}

// Sent returns how many messages were published and the KV cache's
// sequence number of the last batch among them.
func (p *Publisher) Sent() (messages, lastCacheSeq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent, p.lastCache
}

// Close stops publishing and closes the socket; safe to call twice.
func (p *Publisher) Close() error {
	p.cancel()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
	return p.sock.Close()
}

// run forwards batches. A subscription dropped for being slow resumes from
// the retained window; when the window is gone too, the consumer is told
// to start over: AllBlocksCleared and the stored blocks, in one batch.
func (p *Publisher) run(ctx context.Context, s *kvcache.Subscription) {
	defer close(p.done)
	for {
		select {
		case <-ctx.Done():
			s.Close()
			return
		case b, ok := <-s.C():
			if ok {
				p.publish(b)
				continue
			}
		}
		err := s.Err()
		if !errors.Is(err, kvcache.ErrSlowSubscriber) {
			return // the cache closed
		}
		_, last := p.Sent()
		next, err := p.sub(last+1, false)
		if errors.Is(err, kvcache.ErrEventWindow) {
			next, err = p.sub(0, true)
			if err == nil {
				events := append([]kvcache.Event{{Kind: kvcache.AllBlocksCleared}}, next.Snapshot...)
				p.publish(kvcache.Batch{Seq: next.AsOf, UnixNano: time.Now().UnixNano(), Events: events})
			}
		}
		if err != nil {
			p.cfg.Logger.Error("kvzmq: resubscribe failed; publisher stopped", "err", err)
			return
		}
		p.cfg.Logger.Warn("kvzmq: publisher fell behind the KV cache; resumed", "from_seq", last+1)
		for _, b := range next.Backlog {
			p.publish(b)
		}
		s = next
	}
}

func (p *Publisher) publish(b kvcache.Batch) {
	if p.beforePublish != nil {
		p.beforePublish(b)
	}
	payload, err := Encode(b, p.cfg.Rank)
	if err != nil {
		p.cfg.Logger.Error("kvzmq: encode", "seq", b.Seq, "err", err)
		return
	}
	p.mu.Lock()
	seq := p.sent
	p.sent++
	p.lastCache = b.Seq
	p.mu.Unlock()
	msg := zmq4.NewMsgFrom([]byte(p.cfg.Topic), SeqFrame(seq), payload)
	if err := p.sock.SendMulti(msg); err != nil {
		p.cfg.Logger.Warn("kvzmq: send", "seq", seq, "err", err)
	}
}
