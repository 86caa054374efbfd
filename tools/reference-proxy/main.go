// Command reference-proxy is the gateway benchmark's yardstick (bench/bench_gateway.py): the least
// an HTTP proxy does, with the fastest HTTP stack at hand, so each run shows how much of the machine
// any proxy costs before it does anything a gateway must.
//
//	reference-proxy -listen 127.0.0.1:PORT -upstream 127.0.0.1:PORT
//
// Every request but GET /healthz is sent on to -upstream as it came (method, path, headers, body),
// on kept connections (fasthttp's HostClient), and its answer relayed whole; the hop-by-hop headers
// of both are dropped, as any proxy must. It does nothing else: no caller, no model, no route, no
// limit, no ledger, no metrics, no stream relayed chunk by chunk (an SSE answer is relayed whole).
// Every core is used (GOMAXPROCS).
package main

import (
	"flag"
	"log"

	"github.com/valyala/fasthttp"
)

// hopByHop are the headers that describe one connection, not the message (RFC 9110 section 7.6.1).
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "TE", "Trailer"}

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	upstream := flag.String("upstream", "", "host:port every request is sent to")
	flag.Parse()
	if *upstream == "" {
		log.Fatal("-upstream is required")
	}
	client := &fasthttp.HostClient{Addr: *upstream, MaxConns: 4096}
	handler := func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/healthz" {
			ctx.SetBodyString("ok\n")
			return
		}
		for _, name := range hopByHop {
			ctx.Request.Header.Del(name)
		}
		if err := client.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Error("upstream: "+err.Error(), fasthttp.StatusBadGateway)
			return
		}
		for _, name := range hopByHop {
			ctx.Response.Header.Del(name)
		}
	}
	server := &fasthttp.Server{Handler: handler, Name: "reference-proxy"}
	log.Printf("reference-proxy listening on %s, upstream %s", *listen, *upstream)
	log.Fatal(server.ListenAndServe(*listen))
}
