//! HTTP requests to one registry: the scheme (HTTPS, or plain HTTP where
//! allowed), authentication when challenged, retries and timeouts.

use std::io::Read;
use std::sync::Mutex;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::registry::auth::{Challenge, Credentials, PASSWORD_VAR, USER_VAR};
use crate::registry::reference::{is_loopback_host, ImageRef};

/// Largest token server answer read.
const MAX_TOKEN_BODY: u64 = 64 << 10;
/// Largest error body read, for its message.
const MAX_ERROR_BODY: u64 = 16 << 10;
/// Redirects followed, at most.
const MAX_REDIRECTS: u32 = 5;

/// How to reach registries.
#[derive(Clone, Debug)]
pub struct Options {
    /// Whether HTTPS certificates must verify and plain HTTP is refused
    /// (`--tls-verify`, skopeo's name). Plain HTTP is always allowed for
    /// loopback hosts; certificates are always verified when HTTPS is used.
    pub tls_verify: bool,
    /// Longest wait for connecting, and between bytes of an answer.
    pub timeout: Duration,
    /// Retries of a request that failed in a way that may pass.
    pub retries: u32,
    /// Whose credentials to send.
    pub auth: Auth,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tls_verify: true,
            timeout: Duration::from_secs(30),
            retries: 3,
            auth: Auth::Environment,
        }
    }
}

/// Where credentials come from.
#[derive(Clone, Debug)]
pub enum Auth {
    /// The environment or an auth file ([`Credentials::lookup`]).
    Environment,
    /// None: only what anonymous users may read.
    Anonymous,
    /// These.
    Credentials(Credentials),
}

/// A request's body.
pub(crate) enum Body<'a> {
    /// None.
    Empty,
    /// Bytes in memory, sent again if the request is retried.
    Bytes(&'a [u8]),
    /// A stream of this many bytes, sent once (no retry).
    Stream(Box<dyn Read + Send + 'a>, u64),
}

/// Requests to one registry host.
pub(crate) struct Client {
    host: String,
    loopback: bool,
    agent: ureq::Agent,
    options: Options,
    credentials: Option<Credentials>,
    /// `https://HOST` or `http://HOST`, once a request got an answer.
    origin: Mutex<Option<String>>,
    /// The `Authorization` header sent to the registry, once challenged.
    authorization: Mutex<Option<String>>,
}

/// A one-line registry error.
pub(crate) fn failure(message: String, transient: bool) -> Error {
    Error::Registry { message, transient }
}

impl Client {
    /// A client for `image`'s host.
    pub(crate) fn new(image: &ImageRef, options: &Options) -> Result<Client> {
        let credentials = match &options.auth {
            Auth::Environment => Credentials::lookup(&image.host)?,
            Auth::Anonymous => None,
            Auth::Credentials(c) => Some(c.clone()),
        };
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(options.timeout)
            .timeout_read(options.timeout)
            .timeout_write(options.timeout)
            .redirects(MAX_REDIRECTS)
            .user_agent(concat!("hoard/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Client {
            host: image.host.clone(),
            loopback: image.is_loopback(),
            agent,
            options: options.clone(),
            credentials,
            origin: Mutex::new(None),
            authorization: Mutex::new(None),
        })
    }

    /// Whether plain HTTP may be used for `host` (`HOST[:PORT]` of this
    /// registry, or of a token server).
    fn plain_allowed(&self, url_host: Option<&str>) -> bool {
        if !self.options.tls_verify {
            return true;
        }
        url_host.map_or(self.loopback, is_loopback_host)
    }

    /// `https://HOST`, or `http://HOST` when HTTPS gets no answer and
    /// plain HTTP is allowed; found by asking `/v2/` once.
    pub(crate) fn origin(&self) -> Result<String> {
        let mut origin = self.origin.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(known) = origin.as_ref() {
            return Ok(known.clone());
        }
        let answers = |scheme: &str| {
            let url = format!("{scheme}://{}", self.host);
            match self.agent.get(&format!("{url}/v2/")).call() {
                Ok(_) | Err(ureq::Error::Status(..)) => Ok(url),
                Err(ureq::Error::Transport(t)) => Err(transport_text(&t)),
            }
        };
        let found = match answers("https") {
            Ok(url) => url,
            Err(_) if self.plain_allowed(None) => answers("http")
                .map_err(|t| failure(format!("registry {}: {t}", self.host), true))?,
            Err(t) => {
                return Err(failure(
                    format!(
                        "registry {}: {t} (plain HTTP is used only for loopback hosts or with --tls-verify=false)",
                        self.host
                    ),
                    true,
                ))
            }
        };
        *origin = Some(found.clone());
        Ok(found)
    }

    /// Retries of a failed request, at most.
    pub(crate) fn retries(&self) -> u32 {
        self.options.retries
    }

    /// The URL of a `Location` header: a path on the registry, or an
    /// absolute URL (HTTPS, or plain HTTP where allowed).
    pub(crate) fn resolve(&self, location: &str, what: &str) -> Result<String> {
        if location.starts_with('/') {
            return Ok(format!("{}{location}", self.origin()?));
        }
        let allowed = location.starts_with("https://")
            || location
                .strip_prefix("http://")
                .is_some_and(|rest| self.plain_allowed(rest.split('/').next()));
        if !allowed {
            return Err(failure(
                format!("{what}: the registry sent to a location that is not allowed"),
                false,
            ));
        }
        Ok(location.to_string())
    }

    /// Sends a request to `url`, answering one authentication challenge
    /// and retrying failures that may pass (except for a streamed body);
    /// `what` names the request in errors. An answer that is not 2xx is
    /// an error: [`Error::NotFound`] for 404.
    pub(crate) fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Body<'_>,
        what: &str,
    ) -> Result<ureq::Response> {
        let origin = self.origin()?;
        let to_registry = url.starts_with(&format!("{origin}/"));
        let (bytes, mut stream) = match body {
            Body::Empty => (None, None),
            Body::Bytes(b) => (Some(b), None),
            Body::Stream(reader, len) => (None, Some((reader, len))),
        };
        let streamed = stream.is_some();
        let mut challenged = false;
        let mut attempt = 0;
        loop {
            let mut request = self.agent.request(method, url);
            for (name, value) in headers {
                request = request.set(name, value);
            }
            let authorization = self
                .authorization
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if let Some(value) = authorization.filter(|_| to_registry) {
                request = request.set("Authorization", &value);
            }
            let result = match (bytes, stream.take()) {
                (Some(b), _) => request.send_bytes(b),
                (None, Some((reader, len))) => {
                    request.set("Content-Length", &len.to_string()).send(reader)
                }
                (None, None) if streamed => {
                    return Err(failure(format!("{what}: the upload was refused"), false))
                }
                (None, None) => request.call(),
            };
            let retry = attempt < self.options.retries && !streamed;
            match result {
                Ok(response) => return Ok(response),
                Err(ureq::Error::Status(401, response)) if !challenged && to_registry => {
                    challenged = true;
                    self.authenticate(&response, what)?;
                }
                Err(ureq::Error::Status(code, response)) => {
                    if !(retry && retryable(code)) {
                        return Err(status_error(
                            code,
                            response,
                            what,
                            self.credentials.is_some(),
                        ));
                    }
                    self.pause(&mut attempt);
                }
                Err(ureq::Error::Transport(t)) => {
                    if !retry {
                        return Err(failure(format!("{what}: {}", transport_text(&t)), true));
                    }
                    self.pause(&mut attempt);
                }
            }
        }
    }

    /// Waits before retry number `attempt` (100 ms, doubling to 2 s).
    fn pause(&self, attempt: &mut u32) {
        let ms = 100u64 << (*attempt).min(4);
        std::thread::sleep(Duration::from_millis(ms.min(2000)));
        *attempt += 1;
    }

    /// Answers the challenge of a 401 `response`: Basic credentials, or a
    /// Bearer token from the token server (with the credentials, if any).
    fn authenticate(&self, response: &ureq::Response, what: &str) -> Result<()> {
        let challenge = response
            .all("www-authenticate")
            .into_iter()
            .filter_map(Challenge::parse)
            .max_by_key(|c| matches!(c, Challenge::Bearer { .. }));
        let value = match challenge {
            Some(Challenge::Bearer {
                realm,
                service,
                scope,
            }) => format!("Bearer {}", self.token(&realm, service, scope, what)?),
            Some(Challenge::Basic) | None => match &self.credentials {
                Some(c) => c.basic_header(),
                None => return Err(unauthorized(what, false)),
            },
        };
        *self.authorization.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        Ok(())
    }

    /// A token from the token server at `realm`.
    fn token(
        &self,
        realm: &str,
        service: Option<String>,
        scope: Option<String>,
        what: &str,
    ) -> Result<String> {
        let realm_host = realm
            .strip_prefix("https://")
            .map(|_| None)
            .or_else(|| realm.strip_prefix("http://").map(|r| r.split('/').next()));
        let plain_ok = match realm_host {
            Some(None) => true,
            Some(Some(host)) => self.plain_allowed(Some(host)),
            None => false,
        };
        if !plain_ok {
            return Err(failure(
                format!("{what}: the registry's token server is not an allowed https:// URL"),
                false,
            ));
        }
        let mut request = self.agent.get(realm);
        if let Some(service) = &service {
            request = request.query("service", service);
        }
        if let Some(scope) = &scope {
            request = request.query("scope", scope);
        }
        if let Some(c) = &self.credentials {
            request = request.set("Authorization", &c.basic_header());
        }
        let response = match request.call() {
            Ok(r) => r,
            Err(ureq::Error::Status(401 | 403, _)) => {
                return Err(unauthorized(what, self.credentials.is_some()))
            }
            Err(ureq::Error::Status(code, _)) => {
                return Err(failure(
                    format!("{what}: the token server answered HTTP {code}"),
                    retryable(code),
                ))
            }
            Err(ureq::Error::Transport(t)) => {
                return Err(failure(
                    format!("{what}: token server: {}", transport_text(&t)),
                    true,
                ))
            }
        };
        let body = read_bounded(response, MAX_TOKEN_BODY, "token server answer")?;
        let parsed: serde_json::Value = serde_json::from_slice(&body).map_err(|_| {
            failure(
                format!("{what}: the token server's answer is not JSON"),
                false,
            )
        })?;
        ["token", "access_token"]
            .iter()
            .find_map(|k| parsed.get(k).and_then(|t| t.as_str()))
            .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_graphic()))
            .map(str::to_string)
            .ok_or_else(|| failure(format!("{what}: the token server gave no token"), false))
    }
}

/// Whether a status is worth retrying: timeouts, throttling, server errors.
pub(crate) fn retryable(code: u16) -> bool {
    matches!(code, 408 | 425 | 429 | 500..=599)
}

/// Reads at most `limit` bytes of an answer; more is an error.
pub(crate) fn read_bounded(response: ureq::Response, limit: u64, what: &str) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    response
        .into_reader()
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failure(format!("reading the {what}: {e}"), true))?;
    if bytes.len() as u64 > limit {
        return Err(Error::Invalid {
            what: "registry answer",
            why: format!("the {what} is larger than {limit} bytes"),
        });
    }
    Ok(bytes)
}

/// A transport error as one line (ureq's text names the URL, which holds
/// no secret: credentials travel in headers only).
fn transport_text(t: &ureq::Transport) -> String {
    t.to_string().lines().next().unwrap_or("").to_string()
}

fn unauthorized(what: &str, had_credentials: bool) -> Error {
    let why = if had_credentials {
        "the credentials were refused".to_string()
    } else {
        format!(
            "the registry wants credentials (set {USER_VAR} and {PASSWORD_VAR}, or log in with podman or docker)"
        )
    };
    failure(format!("{what}: HTTP 401 Unauthorized: {why}"), false)
}

/// The error for a non-2xx answer, with the registry's error code and
/// message when it gives them.
fn status_error(code: u16, response: ureq::Response, what: &str, had_credentials: bool) -> Error {
    if code == 401 {
        return unauthorized(what, had_credentials);
    }
    let status = format!("HTTP {code} {}", response.status_text());
    let detail = read_bounded(response, MAX_ERROR_BODY, "error")
        .ok()
        .and_then(|body| serde_json::from_slice::<serde_json::Value>(&body).ok())
        .and_then(|v| {
            let first = v.get("errors")?.get(0)?.clone();
            let code = first.get("code")?.as_str()?.to_string();
            let message = first.get("message").and_then(|m| m.as_str()).unwrap_or("");
            Some(format!(" ({code}: {message})"))
        })
        .map(|d| {
            d.chars()
                .take(200)
                .filter(|c| !c.is_control())
                .collect::<String>()
        })
        .unwrap_or_default();
    if code == 404 {
        return Error::NotFound(format!("{what}: {status}{detail}"));
    }
    failure(format!("{what}: {status}{detail}"), retryable(code))
}
