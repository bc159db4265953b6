"""An HTTP proxy that tunnels CONNECT requests, as a corporate egress proxy does.

Usage: connect_proxy.py. Listens on a loopback port the kernel picks and prints
"ready PORT" once it does. A plain GET of
/__proxy/stats answers JSON: the tunnels opened, each with its target and the
Proxy-Authorization header it came with.
"""
import asyncio
import json
import signal

# The test process blocks SIGTERM and children inherit that: unblock it so `terminate()` works.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

tunnels = []


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def handle(reader, writer):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    if method == "CONNECT":
        host, port = target.rsplit(":", 1)
        tunnels.append({"target": target, "authorization": headers.get("proxy-authorization", "")})
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        return
    body = json.dumps({"tunnels": tunnels}).encode() if target == "/__proxy/stats" else b"only CONNECT is proxied"
    status = b"200 OK" if target == "/__proxy/stats" else b"405 Method Not Allowed"
    writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    await writer.drain()
    writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print("ready", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
