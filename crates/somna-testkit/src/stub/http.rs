//! HTTP/1.1 on the socket, by hand (`httparse` for request heads): reading one request — a
//! `content-length` or chunked body — and writing one response.

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::reply::RecordedRequest;

pub(super) async fn write_response(
    socket: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    body: &[u8],
    close: bool,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n", body.len()));
    if close {
        head.push_str("connection: close\r\n");
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body).await?;
    socket.flush().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Most bytes a request head may take.
const MAX_HEAD: usize = 64 * 1024;
/// Most bytes a request body may take.
const MAX_BODY: usize = 32 * 1024 * 1024;

/// Reads one request (head and body). `Ok(None)` when the client closed the connection between requests.
/// The flag is true when the client asked to close the connection after this request.
pub(super) async fn read_request(
    socket: &mut TcpStream,
    buffer: &mut Vec<u8>,
) -> std::io::Result<Option<(RecordedRequest, bool)>> {
    let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    // Read until the head is complete.
    let head_len = loop {
        if let Some(i) = find(buffer, b"\r\n\r\n") {
            break i + 4;
        }
        if buffer.len() > MAX_HEAD {
            return Err(invalid("request head too large"));
        }
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return if buffer.is_empty() {
                Ok(None)
            } else {
                Err(invalid("connection closed mid-request"))
            };
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let mut raw_headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut raw_headers);
    let status = parsed
        .parse(&buffer[..head_len])
        .map_err(|e| invalid(&e.to_string()))?;
    if status.is_partial() {
        return Err(invalid("incomplete request head"));
    }
    let method = parsed.method.unwrap_or("").to_string();
    let path = parsed.path.unwrap_or("").to_string();
    let version = parsed.version.unwrap_or(1);
    let headers: Vec<(String, String)> = parsed
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    let wants_close = match header("connection") {
        Some(v) => v.contains("close"),
        None => version == 0,
    };
    buffer.drain(..head_len);
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(socket, buffer).await?
    } else {
        let length: usize = match header("content-length") {
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| invalid("bad content-length"))?,
            None => 0,
        };
        if length > MAX_BODY {
            return Err(invalid("request body too large"));
        }
        fill(socket, buffer, length).await?;
        buffer.drain(..length).collect()
    };
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    let body = serde_json::from_str(&raw_body).unwrap_or(Value::Null);
    Ok(Some((
        RecordedRequest {
            method,
            path,
            headers,
            body,
            raw_body,
        },
        wants_close,
    )))
}

/// Reads until `buffer` holds at least `n` bytes.
async fn fill(socket: &mut TcpStream, buffer: &mut Vec<u8>, n: usize) -> std::io::Result<()> {
    while buffer.len() < n {
        let mut chunk = [0u8; 8192];
        let read = socket.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed mid-body",
            ));
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    Ok(())
}

/// Where the first line of `buffer` ends (the index of its `\r\n`), reading until it has one.
async fn find_line_end(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> std::io::Result<usize> {
    loop {
        if let Some(i) = find(buffer, b"\r\n") {
            return Ok(i);
        }
        let want = buffer.len() + 1;
        fill(socket, buffer, want).await?;
    }
}

/// Decodes a chunked body (chunk extensions and trailers are skipped).
async fn read_chunked(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> std::io::Result<Vec<u8>> {
    let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut body = Vec::new();
    loop {
        let line_end = find_line_end(socket, buffer).await?;
        let line = String::from_utf8_lossy(&buffer[..line_end]).into_owned();
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
        buffer.drain(..line_end + 2);
        if size == 0 {
            // Trailers end with an empty line.
            loop {
                let end = find_line_end(socket, buffer).await?;
                buffer.drain(..end + 2);
                if end == 0 {
                    return Ok(body);
                }
            }
        }
        if body.len() + size > MAX_BODY {
            return Err(invalid("request body too large"));
        }
        fill(socket, buffer, size + 2).await?;
        body.extend_from_slice(&buffer[..size]);
        buffer.drain(..size + 2);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
