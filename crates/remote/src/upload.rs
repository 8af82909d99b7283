//! An object written as it is made (`hoard create -o s3://bucket/key`):
//! the bytes go out as the parts of a multipart upload while the build
//! writes them, with no copy of the object anywhere. At most
//! [`SENDING`] parts are on their way at once, and one more fills, so
//! memory stays bounded whatever the object's size. The object appears
//! only when [`Upload::complete`] is called; an upload dropped before
//! that is aborted, and [`abort_all`] aborts every upload of the
//! process (for one about to exit on a signal), so no part is left
//! stored and no half object appears.

use crate::objects::Bucket;
use crate::s3::one_line;
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as ObjectPath;
use object_store::{MultipartId, PutPayload};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Bytes of each of the first 1,000 parts (S3 asks at least 5 MiB of
/// every part but the last); each further 1,000 parts are this much
/// larger, so the 10,000 parts S3 allows hold 430 GiB.
pub const PART: usize = 8 << 20;

/// The most parts being sent at once.
pub const SENDING: usize = 4;

/// The most parts S3 takes in one upload.
const MAX_PARTS: usize = 10_000;

/// An upload under way, as [`abort_all`] needs it.
struct Live {
    number: u64,
    store: Arc<AmazonS3>,
    runtime: tokio::runtime::Handle,
    path: ObjectPath,
    id: MultipartId,
    timeout: Duration,
}

impl Live {
    /// Aborts the upload, giving up after twice the request timeout.
    fn abort(&self) {
        let abort = self.store.abort_multipart(&self.path, &self.id);
        let _ = self
            .runtime
            .block_on(async { tokio::time::timeout(self.timeout * 2, abort).await });
    }
}

/// Every upload of this process not yet completed or aborted.
static LIVE: Mutex<Vec<Live>> = Mutex::new(Vec::new());
/// The number the next upload gets in [`LIVE`].
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Aborts every upload of this process under way, for a process about
/// to exit on a signal. No upload can start or complete afterwards (the
/// list stays locked); one completed already stays.
pub fn abort_all() {
    let live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    for upload in live.iter() {
        upload.abort();
    }
    std::mem::forget(live);
}

/// Removes upload `number` from [`LIVE`], returning it.
fn unlist(live: &mut Vec<Live>, number: u64) -> Option<Live> {
    let at = live.iter().position(|l| l.number == number)?;
    Some(live.swap_remove(at))
}

/// An object being uploaded: written with [`Write`], made to appear by
/// [`Upload::complete`], aborted when dropped before.
pub struct Upload {
    bucket: Bucket,
    key: String,
    path: ObjectPath,
    id: MultipartId,
    /// Its place in [`LIVE`].
    number: u64,
    /// The part being filled.
    part: Vec<u8>,
    /// Parts on their way, in order.
    sending: VecDeque<JoinHandle<object_store::Result<PartId>>>,
    /// Parts stored, in order.
    sent: Vec<PartId>,
    /// Bytes written.
    size: u64,
    /// Completed or aborted: nothing is left to do when dropped.
    ended: bool,
}

impl Upload {
    /// Starts uploading the object `key` of `bucket`.
    pub fn start(bucket: Bucket, key: &str) -> Result<Self, String> {
        let path = ObjectPath::from(key);
        let url = bucket.url(key);
        // Started and listed at once, so that a signal cannot come between.
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        let started = bucket.runtime.block_on(async {
            tokio::time::timeout(bucket.timeout * 2, bucket.store.create_multipart(&path)).await
        });
        let id = match started {
            Ok(Ok(id)) => id,
            Ok(Err(e)) => return Err(format!("{url}: cannot start the upload: {}", one_line(&e))),
            Err(_) => return Err(format!("{url}: cannot start the upload: timed out")),
        };
        let number = NEXT.fetch_add(1, Ordering::Relaxed);
        live.push(Live {
            number,
            store: Arc::clone(&bucket.store),
            runtime: bucket.runtime.handle().clone(),
            path: path.clone(),
            id: id.clone(),
            timeout: bucket.timeout,
        });
        drop(live);
        Ok(Upload {
            part: Vec::with_capacity(PART),
            bucket,
            key: key.to_string(),
            path,
            id,
            number,
            sending: VecDeque::new(),
            sent: Vec::new(),
            size: 0,
            ended: false,
        })
    }

    /// `s3://bucket/key`, for messages.
    fn url(&self) -> String {
        self.bucket.url(&self.key)
    }

    /// The number of the part being filled (from 0).
    fn part_number(&self) -> usize {
        self.sent.len() + self.sending.len()
    }

    /// The size of the part being filled.
    fn part_size(&self) -> usize {
        PART * (1 + self.part_number() / 1000)
    }

    /// Sends the part filled so far, waiting for earlier ones while
    /// [`SENDING`] are on their way (errors without the URL, which the
    /// writer's messages give).
    fn send_part(&mut self) -> Result<(), String> {
        let index = self.part_number();
        if index >= MAX_PARTS {
            return Err("too large for one upload".into());
        }
        let next = PART * (1 + (index + 1) / 1000);
        let part = std::mem::replace(&mut self.part, Vec::with_capacity(next));
        let store = Arc::clone(&self.bucket.store);
        let (path, id) = (self.path.clone(), self.id.clone());
        let payload = PutPayload::from(part);
        self.sending.push_back(
            self.bucket
                .runtime
                .spawn(async move { store.put_part(&path, &id, index, payload).await }),
        );
        while self.sending.len() > SENDING {
            self.wait_for_oldest()?;
        }
        Ok(())
    }

    /// Waits for the oldest part on its way to be stored.
    fn wait_for_oldest(&mut self) -> Result<(), String> {
        let Some(sending) = self.sending.pop_front() else {
            return Ok(());
        };
        let number = self.sent.len() + 1;
        match self.bucket.runtime.block_on(sending) {
            Ok(Ok(part)) => {
                self.sent.push(part);
                Ok(())
            }
            Ok(Err(e)) => Err(format!("cannot store part {number}: {}", one_line(&e))),
            Err(e) => Err(format!("part {number} failed: {e}")),
        }
    }

    /// Sends what is left, waits for every part, and makes the object
    /// appear; returns its size. Refused, and aborted, when the object
    /// exists by then and not `overwrite`.
    pub fn complete(mut self, overwrite: bool) -> Result<u64, String> {
        let url = self.url();
        if !self.part.is_empty() || self.part_number() == 0 {
            self.send_part().map_err(|e| format!("{url}: {e}"))?;
        }
        while !self.sending.is_empty() {
            self.wait_for_oldest().map_err(|e| format!("{url}: {e}"))?;
        }
        if !overwrite && self.bucket.exists(&self.key) {
            return Err(format!("{url}: already exists (use -f to overwrite)"));
        }
        let parts = std::mem::take(&mut self.sent);
        // Completed while listed, so that a signal waits for it to end.
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        let completed = self.bucket.runtime.block_on(async {
            let complete = self
                .bucket
                .store
                .complete_multipart(&self.path, &self.id, parts);
            tokio::time::timeout(self.bucket.timeout * 4, complete).await
        });
        match completed {
            Ok(Ok(_)) => {
                unlist(&mut live, self.number);
                self.ended = true;
                Ok(self.size)
            }
            Ok(Err(e)) => Err(format!("{url}: cannot complete: {}", one_line(&e))),
            Err(_) => Err(format!("{url}: cannot complete: timed out")),
        }
    }
}

impl Write for Upload {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let room = self.part_size() - self.part.len();
        let n = room.min(bytes.len());
        self.part.extend_from_slice(&bytes[..n]);
        self.size += n as u64;
        if self.part.len() == self.part_size() {
            self.send_part().map_err(std::io::Error::other)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        for sending in self.sending.drain(..) {
            sending.abort();
        }
        let listed = unlist(
            &mut LIVE.lock().unwrap_or_else(|p| p.into_inner()),
            self.number,
        );
        if let Some(live) = listed {
            live.abort();
        }
    }
}
