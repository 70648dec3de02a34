"""Independent decoder for the oengine ZMQ KV event feed (docs/api.md,
"KV events over ZMQ"): a pyzmq SUB socket and msgpack, nothing from oengine.

usage: zmq_sub.py ENDPOINT TOPIC COUNT
Prints "ready", then one JSON line per message:
{"topic": str, "seq": int, "batch": <the msgpack payload as decoded>}.
"""
import json
import sys

import msgpack
import zmq


def main():
    endpoint, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.RCVTIMEO, 20000)
    sock.connect(endpoint)
    sock.setsockopt_string(zmq.SUBSCRIBE, topic)
    print("ready", flush=True)
    for _ in range(count):
        frames = sock.recv_multipart()
        if len(frames) != 3:
            raise SystemExit("message with %d frames" % len(frames))
        t, seq, payload = frames
        if len(seq) != 8:
            raise SystemExit("sequence frame of %d bytes" % len(seq))
        batch = msgpack.unpackb(payload, raw=False, strict_map_key=True)
        print(json.dumps({"topic": t.decode(), "seq": int.from_bytes(seq, "big"), "batch": batch}), flush=True)
    sock.close(linger=0)
    ctx.term()


if __name__ == "__main__":
    main()
