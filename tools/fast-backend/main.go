// Command fast-backend is an OpenAI-shaped backend that answers at once with a fixed reply, for
// the gateway benchmark (bench/bench_gateway.py): a backend this cheap leaves the gateway as the
// thing measured, where a Python backend capped the direct arm at about 2,600 requests/s.
//
// POST /v1/chat/completions and /v1/completions answer one fixed body with "usage", or, when the
// request body says "stream": true, a few SSE chunks, a usage chunk and "data: [DONE]". GET
// /v1/models names the one model; GET /healthz answers "ok". Built by build.sh from the pinned
// fasthttp (go.mod); every core is used (GOMAXPROCS).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"log"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"
)

// request is the little the backend reads of a request body: whether to stream, and the model
// to name in the answer (as an OpenAI server echoes it).
type request struct {
	stream bool
	model  []byte
}

// parse reads "stream" and "model" by byte search: a JSON decoder per request would be most of
// the backend's work, and the benchmark's bodies are compact JSON this matches.
func parse(body []byte) request {
	r := request{model: []byte("fast-backend")}
	if bytes.Contains(body, []byte(`"stream":true`)) || bytes.Contains(body, []byte(`"stream": true`)) {
		r.stream = true
	}
	for _, key := range [][]byte{[]byte(`"model":"`), []byte(`"model": "`)} {
		if i := bytes.Index(body, key); i >= 0 {
			rest := body[i+len(key):]
			if j := bytes.IndexByte(rest, '"'); j > 0 {
				r.model = rest[:j]
			}
			break
		}
	}
	return r
}

const usage = `"usage":{"prompt_tokens":8,"completion_tokens":4,"total_tokens":12}`

func chatBody(model []byte) []byte {
	return fmt.Appendf(nil, `{"id":"chatcmpl-fast","object":"chat.completion","created":0,"model":"%s",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"fixed reply"},"finish_reason":"stop"}],%s}`,
		model, usage)
}

func completionBody(model []byte) []byte {
	return fmt.Appendf(nil, `{"id":"cmpl-fast","object":"text_completion","created":0,"model":"%s",`+
		`"choices":[{"index":0,"text":"fixed reply","finish_reason":"stop"}],%s}`, model, usage)
}

// streamEvents is the SSE answer: one event per word, the finish, a usage event (choices empty, as
// OpenAI sends it with stream_options.include_usage) and the end marker.
func streamEvents(model []byte, chat bool) [][]byte {
	var events [][]byte
	object, id := "text_completion", "cmpl-fast"
	if chat {
		object, id = "chat.completion.chunk", "chatcmpl-fast"
	}
	choice := func(text, finish string) string {
		f := "null"
		if finish != "" {
			f = strconv.Quote(finish)
		}
		if chat {
			return fmt.Sprintf(`{"index":0,"delta":{"content":%s},"finish_reason":%s}`, strconv.Quote(text), f)
		}
		return fmt.Sprintf(`{"index":0,"text":%s,"finish_reason":%s}`, strconv.Quote(text), f)
	}
	for _, c := range []string{choice("fixed", ""), choice(" reply", ""), choice("", "stop")} {
		events = append(events, fmt.Appendf(nil,
			"data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":0,\"model\":\"%s\",\"choices\":[%s]}\n\n",
			id, object, model, c))
	}
	events = append(events, fmt.Appendf(nil,
		"data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":0,\"model\":\"%s\",\"choices\":[],%s}\n\n",
		id, object, model, usage))
	return append(events, []byte("data: [DONE]\n\n"))
}

func handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	switch {
	case path == "/healthz" && ctx.IsGet():
		ctx.SetBodyString("ok\n")
	case path == "/v1/models" && ctx.IsGet():
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"object":"list","data":[{"id":"fast-backend","object":"model","created":0,"owned_by":"fast-backend"}]}`)
	case (path == "/v1/chat/completions" || path == "/v1/completions") && ctx.IsPost():
		r := parse(ctx.PostBody())
		chat := path == "/v1/chat/completions"
		if r.stream {
			ctx.SetContentType("text/event-stream")
			ctx.Response.Header.Set("Cache-Control", "no-cache")
			events := streamEvents(r.model, chat)
			// chunked, one flush per event, as an inference server sends tokens as they come
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
				for _, event := range events {
					if _, err := w.Write(event); err != nil {
						return
					}
					if err := w.Flush(); err != nil {
						return
					}
				}
			})
		} else if chat {
			ctx.SetContentType("application/json")
			ctx.SetBody(chatBody(r.model))
		} else {
			ctx.SetContentType("application/json")
			ctx.SetBody(completionBody(r.model))
		}
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"error":{"message":"no such path","type":"invalid_request_error","code":"not_found"}}`)
	}
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 8000, "port to listen on")
	flag.Parse()
	listener, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		log.Fatal(err)
	}
	server := &fasthttp.Server{Handler: handle, Name: "fast-backend", NoDefaultDate: true}
	log.Printf("fast-backend listening on %s", listener.Addr())
	log.Fatal(server.Serve(listener))
}
