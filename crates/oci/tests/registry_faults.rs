//! The registry client against a small fake registry on 127.0.0.1 that
//! asks for a token, fails, lies or hangs: each gives a clear error,
//! within the timeout, and no unchecked byte.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hoard_oci::registry::{auth::Credentials, Auth, Options, Registry};
use hoard_oci::{Digest, Error, Store};

/// A request as the fake server saw it.
#[derive(Clone, Debug)]
struct Request {
    path: String,
    authorization: Option<String>,
}

/// What the fake server answers: status, headers, body; `None` hangs.
type Answer = Option<(u16, Vec<(String, String)>, Vec<u8>)>;

/// A fake registry answering with `handler`; it records every request.
struct Fake {
    port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Fake {
    fn start(handler: impl Fn(&Request, u16) -> Answer + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let handler = Arc::new(handler);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = seen.clone();
                let handler = handler.clone();
                std::thread::spawn(move || serve(stream, port, &*handler, &seen));
            }
        });
        Fake { port, requests }
    }

    fn url(&self, name: &str) -> String {
        format!("docker://127.0.0.1:{}/{name}", self.port)
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

/// Answers the requests of one connection (plain HTTP/1.1; a TLS hello
/// gets a 400, as a plain server gives).
fn serve(
    stream: TcpStream,
    port: u16,
    handler: &(dyn Fn(&Request, u16) -> Answer + Sync),
    seen: &Mutex<Vec<Request>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let is_http = line.starts_with(|c: char| c.is_ascii_uppercase());
        let Some(path) = line
            .split(' ')
            .nth(1)
            .filter(|p| is_http && p.starts_with('/'))
            .map(str::to_string)
        else {
            let _ = writer.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            return;
        };
        let (mut authorization, mut length) = (None, 0usize);
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            match name.to_ascii_lowercase().as_str() {
                "authorization" => authorization = Some(value.trim().to_string()),
                "content-length" => length = value.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        let request = Request {
            path,
            authorization,
        };
        seen.lock().unwrap().push(request.clone());
        let Some((status, headers, body)) = handler(&request, port) else {
            std::thread::sleep(Duration::from_secs(60));
            return;
        };
        let mut head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n", body.len());
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(&body).is_err() {
            return;
        }
    }
}

/// The error of a request that must fail.
fn error_of(result: hoard_oci::Result<hoard_oci::Fetched>) -> Error {
    match result {
        Ok(fetched) => panic!("accepted a {} manifest", fetched.media_type),
        Err(e) => e,
    }
}

fn options(auth: Auth) -> Options {
    Options {
        tls_verify: true,
        timeout: Duration::from_millis(500),
        retries: 2,
        auth,
    }
}

const MANIFEST: &[u8] =
    br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}"#;

fn manifest_answer() -> Answer {
    Some((
        200,
        vec![(
            "Content-Type".into(),
            "application/vnd.oci.image.manifest.v1+json".into(),
        )],
        MANIFEST.to_vec(),
    ))
}

/// A registry that wants a bearer token, which its token server gives
/// for the Basic credentials `u:p` (Base64 `dTpw`).
fn token_registry(request: &Request, port: u16) -> Answer {
    let challenge = format!(
        r#"Bearer realm="http://127.0.0.1:{port}/token",service="fake",scope="repository:r:pull""#
    );
    if request.path.starts_with("/token") {
        return match request.authorization.as_deref() {
            Some("Basic dTpw") => Some((200, vec![], br#"{"token":"T0K"}"#.to_vec())),
            _ => Some((401, vec![], vec![])),
        };
    }
    if request.authorization.as_deref() == Some("Bearer T0K") {
        return manifest_answer();
    }
    Some((401, vec![("WWW-Authenticate".into(), challenge)], vec![]))
}

#[test]
fn bearer_tokens_are_fetched_with_the_credentials() {
    let fake = Fake::start(token_registry);
    let url = fake.url("r:t");

    let anonymous = Registry::open(&url, &options(Auth::Anonymous)).unwrap();
    let err = error_of(anonymous.manifest("t")).to_string();
    assert!(
        err.contains("401") && err.contains("HOARD_REGISTRY_USER"),
        "{err}"
    );

    let wrong = Credentials::new("u", "wrong");
    let refused = Registry::open(&url, &options(Auth::Credentials(wrong))).unwrap();
    let err = error_of(refused.manifest("t")).to_string();
    assert!(err.contains("refused") && !err.contains("wrong"), "{err}");

    let right = Credentials::new("u", "p");
    let registry = Registry::open(&url, &options(Auth::Credentials(right))).unwrap();
    let fetched = registry.manifest("t").unwrap();
    assert_eq!(fetched.bytes, MANIFEST);
    assert_eq!(fetched.digest, Digest::sha256_of(MANIFEST));
    let token = fake
        .requests()
        .into_iter()
        .find(|r| r.path.starts_with("/token") && r.authorization.as_deref() == Some("Basic dTpw"))
        .expect("a token request with the credentials");
    assert!(
        token.path.contains("service=fake") && token.path.contains("scope=repository%3Ar%3Apull"),
        "{}",
        token.path
    );
}

#[test]
fn not_found_and_server_errors() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let fake = Fake::start(move |request, _| match request.path.as_str() {
        "/v2/" => Some((200, vec![], vec![])),
        p if p.contains("/missing/") => Some((
            404,
            vec![],
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#.to_vec(),
        )),
        _ => {
            counted.fetch_add(1, Ordering::SeqCst);
            Some((500, vec![], b"oops".to_vec()))
        }
    });
    let registry = Registry::open(&fake.url("missing:t"), &options(Auth::Anonymous)).unwrap();
    match registry.manifest("t") {
        Err(Error::NotFound(m)) => assert!(m.contains("MANIFEST_UNKNOWN"), "{m}"),
        other => panic!("not a not-found: {:?}", other.map(|f| f.media_type)),
    }
    let registry = Registry::open(&fake.url("broken:t"), &options(Auth::Anonymous)).unwrap();
    match registry.manifest("t") {
        Err(Error::Registry { message, transient }) => {
            assert!(message.contains("500") && transient, "{message}")
        }
        other => panic!("not a server error: {:?}", other.map(|f| f.media_type)),
    }
    // The first try and two retries.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[test]
fn a_hanging_registry_times_out() {
    let fake = Fake::start(|_, _| None);
    let mut o = options(Auth::Anonymous);
    o.retries = 0;
    let registry = Registry::open(&fake.url("r:t"), &o).unwrap();
    let start = Instant::now();
    let err = error_of(registry.manifest("t"));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert!(
        matches!(
            err,
            Error::Registry {
                transient: true,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn content_that_does_not_match_its_digest_is_refused() {
    let blob = b"the real blob".to_vec();
    let fake = Fake::start(|request, _| match request.path.as_str() {
        "/v2/" => Some((200, vec![], vec![])),
        p if p.contains("/blobs/") => Some((200, vec![], b"not the blob!".to_vec())),
        p if p.ends_with("/manifests/lying") => Some((
            200,
            vec![(
                "Docker-Content-Digest".into(),
                Digest::sha256_of(b"other").to_string(),
            )],
            MANIFEST.to_vec(),
        )),
        _ => manifest_answer(),
    });
    let registry = Registry::open(&fake.url("r:t"), &options(Auth::Anonymous)).unwrap();
    // A manifest asked for by digest, or named by the server's digest
    // header, must hash to it.
    let other = Digest::sha256_of(b"other manifest");
    assert!(matches!(
        registry.manifest(&other.to_string()),
        Err(Error::DigestMismatch { .. })
    ));
    assert!(matches!(
        registry.manifest("lying"),
        Err(Error::DigestMismatch { .. })
    ));
    // A blob of the right size but other bytes fails at its end.
    let digest = Digest::sha256_of(&blob);
    let mut read = Vec::new();
    let result = registry
        .blob(&digest, blob.len() as u64)
        .unwrap()
        .read_to_end(&mut read);
    assert!(result.is_err(), "a blob that failed its digest was read");
}
