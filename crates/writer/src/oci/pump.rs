//! A blob handed to a reader that must own its input (libarchive's):
//! a thread reads the blob to its end, always, and passes the bytes on
//! through a channel. Reading to the end is what checks the digest and
//! size, so a layer whose tar ends before its blob does is still checked.

use crossbeam_channel::{bounded, Receiver, Sender};
use std::io::{self, Read};

/// Bytes passed at a time.
const CHUNK: usize = 1 << 20;

/// Runs `consume` over a stream of `blob`'s bytes while a thread reads
/// `blob` to its end. A failure to read the blob (its digest or size
/// differs, say) is the result, before any failure of `consume`.
pub(super) fn with_stream<'a>(
    blob: Box<dyn Read + Send + 'a>,
    consume: impl FnOnce(Box<dyn Read + Send>) -> Result<(), String>,
) -> Result<(), String> {
    let (tx, rx) = bounded(4);
    std::thread::scope(|s| {
        let reading = s.spawn(move || read_to_end(blob, tx));
        let consumed = consume(Box::new(ChannelReader {
            rx,
            chunk: Vec::new(),
            at: 0,
        }));
        // `consume` dropped the receiver: the thread reads on alone.
        let read = reading
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the reading thread panicked")));
        read.map_err(|e| e.to_string())?;
        consumed
    })
}

/// Reads `blob` to its end, sending its bytes while someone listens.
fn read_to_end(
    mut blob: Box<dyn Read + Send + '_>,
    tx: Sender<io::Result<Vec<u8>>>,
) -> io::Result<()> {
    let mut listening = true;
    loop {
        let mut buf = vec![0u8; CHUNK];
        match blob.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                buf.truncate(n);
                listening = listening && tx.send(Ok(buf)).is_ok();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                if listening {
                    let _ = tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                }
                return Err(e);
            }
        }
    }
}

/// The receiving end, as a reader.
struct ChannelReader {
    rx: Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => (self.chunk, self.at) = (chunk, 0),
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
