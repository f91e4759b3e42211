//! One typed call of an endpoint: the path filled in from the marker type's template, the
//! query, the request document written at the client's version and the answer read at it.

use std::marker::PhantomData;

use rebill_models::{ApiEndpoint, Body, Endpoint, LaterResponse};
use rebill_xml::{Mode, WireContext, XmlResource, from_xml, to_xml};
use reqwest::Method;

use crate::client::{Answer, Client};
use crate::error::Error;

/// A response whose resource changed at a version (`invoice` before 2.10, `invoice_collection`
/// from 2.10): which one came depends on the client's version.
#[derive(Debug, Clone, PartialEq)]
pub enum ByVersion<T, L> {
    /// The resource of the versions before the change.
    Earlier(T),
    /// The resource from the change on.
    Later(L),
}

impl<T, L> ByVersion<T, L> {
    /// The earlier resource, if that is what came.
    pub fn earlier(self) -> Option<T> {
        match self {
            ByVersion::Earlier(t) => Some(t),
            ByVersion::Later(_) => None,
        }
    }

    /// The later resource, if that is what came.
    pub fn later(self) -> Option<L> {
        match self {
            ByVersion::Earlier(_) => None,
            ByVersion::Later(l) => Some(l),
        }
    }
}

pub(crate) fn method(endpoint: &Endpoint) -> Method {
    match endpoint.method {
        rebill_models::Method::Get => Method::GET,
        rebill_models::Method::Post => Method::POST,
        rebill_models::Method::Put => Method::PUT,
        rebill_models::Method::Delete => Method::DELETE,
    }
}

/// A prepared call of endpoint `E`; the generated methods build it and await one of its
/// readers.
pub(crate) struct Call<E> {
    client: Client,
    path: String,
    query: Vec<(&'static str, String)>,
    body: Option<String>,
    endpoint: PhantomData<fn() -> E>,
}

impl<E: ApiEndpoint> Call<E> {
    /// The call with its path parameters (percent-encoded as one segment each).
    pub(crate) fn new(client: &Client, params: &[&str]) -> Self {
        Call {
            client: client.clone(),
            path: E::ENDPOINT.render(params),
            query: Vec::new(),
            body: None,
            endpoint: PhantomData,
        }
    }

    /// The request document.
    pub(crate) fn body(mut self, value: &E::Request) -> Self
    where
        E::Request: XmlResource,
    {
        self.body = Some(to_xml(value, self.client.wire_context(), Mode::Request));
        self
    }

    /// A query parameter the endpoint declares.
    pub(crate) fn query(mut self, name: &'static str, value: String) -> Self {
        debug_assert!(E::ENDPOINT.query.contains(&name), "{} declares no query parameter {name}", E::ENDPOINT.name);
        self.query.push((name, value));
        self
    }

    async fn send(self) -> Result<(Client, Answer), Error> {
        let mut url = self.client.url(&self.path)?;
        if !self.query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in &self.query {
                pairs.append_pair(name, value);
            }
        }
        let answer = self.client.send(method(E::ENDPOINT), url, self.body).await?;
        Ok((self.client, answer))
    }

    /// Sends the call and reads the answer's resource.
    pub(crate) async fn resource(self) -> Result<E::Response, Error>
    where
        E::Response: XmlResource,
    {
        let (client, answer) = self.send().await?;
        read(&answer.body, client.wire_context())
    }

    /// Sends the call and reads the resource of the client's version (the marker's later
    /// resource from the version of the change on).
    pub(crate) async fn by_version(self) -> Result<ByVersion<E::Response, E::Later>, Error>
    where
        E: LaterResponse,
        E::Response: XmlResource,
        E::Later: XmlResource,
    {
        let (client, answer) = self.send().await?;
        let ctx = client.wire_context();
        if E::later_at(ctx.version) {
            read(&answer.body, ctx).map(ByVersion::Later)
        } else {
            read(&answer.body, ctx).map(ByVersion::Earlier)
        }
    }

    /// Sends the call, which answers without a body.
    pub(crate) async fn empty(self) -> Result<(), Error> {
        debug_assert_eq!(E::ENDPOINT.response, Body::Empty);
        self.send().await.map(|_| ())
    }
}

pub(crate) fn read<T: XmlResource>(body: &[u8], ctx: &WireContext) -> Result<T, Error> {
    from_xml(body, ctx, Mode::Response).map_err(Error::decode)
}
