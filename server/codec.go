package server

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// utf8Codec is the proto codec with one difference: a message whose string
// fields are not valid UTF-8 decodes "successfully" and is remembered as
// bad, so that the interceptors refuse it with INVALID_ARGUMENT and an
// ErrorInfo (docs/design.md §1). grpc-go turns any codec error into
// INTERNAL without details, which tells a client nothing.
type utf8Codec struct {
	base encoding.CodecV2
	bad  sync.Map // message (pointer) -> error, until an interceptor takes it
}

func newUTF8Codec() *utf8Codec {
	return &utf8Codec{base: encoding.GetCodecV2("proto")}
}

func (c *utf8Codec) Name() string { return c.base.Name() }

func (c *utf8Codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c *utf8Codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	if err != nil && strings.Contains(err.Error(), "invalid UTF-8") {
		c.bad.Store(v, err)
		return nil
	}
	return err
}

// take reports (and forgets) a decoding failure of msg.
func (c *utf8Codec) take(msg any) *apiError {
	err, ok := c.bad.LoadAndDelete(msg)
	if !ok {
		return nil
	}
	return invalidf("the request is not valid: %v", err)
}

// unaryUTF8 is the outermost unary interceptor, so the codec's record of a
// refused message is always taken (one release path). Credentials are still
// checked first: an unauthenticated caller learns nothing about its body.
func (s *Server) unaryUTF8(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if aerr := s.codec.take(req); aerr != nil {
		if _, err := s.grpcAuth(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		s.metrics.rejected(aerr.reason)
		return nil, aerr.err()
	}
	return h(ctx, req)
}

func (s *Server) streamUTF8(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &utf8Stream{ServerStream: ss, codec: s.codec})
}

// utf8Stream refuses a received message with invalid UTF-8 the same way.
type utf8Stream struct {
	grpc.ServerStream
	codec *utf8Codec
}

func (u *utf8Stream) RecvMsg(m any) error {
	if err := u.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if aerr := u.codec.take(m); aerr != nil {
		return aerr.err()
	}
	return nil
}
