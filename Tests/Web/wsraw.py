"""A raw WebSocket client for the hostile tests: it sends frames exactly as told (unmasked, reserved
bits, lying lengths), which real client libraries refuse to do."""
import base64
import os
import socket
import struct


class RawWebSocket:
    def __init__(self, port, path="/ws", headers=None, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n")
        for name, value in (headers or {}).items():
            request += f"{name}: {value}\r\n"
        self.sock.sendall((request + "\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else None

    def send_frame(self, opcode, payload, fin=True, mask=True, rsv=0, length=None):
        self.sock.sendall(self.frame(opcode, payload, fin, mask, rsv, length))

    @staticmethod
    def frame(opcode, payload, fin=True, mask=True, rsv=0, length=None):
        """The bytes of one client frame; `length` lies about the payload's length when given."""
        first = (0x80 if fin else 0) | (rsv << 4) | opcode
        n = len(payload) if length is None else length
        if n <= 125:
            header = struct.pack("!BB", first, (0x80 if mask else 0) | n)
        elif n <= 0xFFFF:
            header = struct.pack("!BBH", first, (0x80 if mask else 0) | 126, n)
        else:
            header = struct.pack("!BBQ", first, (0x80 if mask else 0) | 127, n)
        if mask:
            key = os.urandom(4)
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
            header += key
        return header + payload

    def send_text(self, text):
        self.send_frame(0x1, text.encode() if isinstance(text, str) else text)

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read_frame(self):
        """(fin, opcode, payload) of the next frame from the server (which must not mask)."""
        b0, b1 = self._read(2)
        assert b1 & 0x80 == 0, "the server masked a frame"
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        return bool(b0 & 0x80), b0 & 0x0F, self._read(n)

    def read_close_code(self):
        """Reads frames until the close frame; returns its status code."""
        while True:
            _, opcode, payload = self.read_frame()
            if opcode == 0x8:
                return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None

    def is_closed_by_server(self, timeout=10):
        """True once the server closed the TCP connection (read returns EOF or reset)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()
