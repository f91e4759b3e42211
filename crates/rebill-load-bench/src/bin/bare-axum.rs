//! The baseline of the load benchmark: a bare axum server answering `GET /one` and `GET /page`
//! with fixed bytes (the bodies rebill served), and `POST /one` (the body read, then dropped)
//! with 201 and the bytes of `GET /one`, without any middleware, storage or XML work.
//!
//! `bare-axum ADDR ONE_FILE PAGE_FILE`

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::routing::get;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, one, page] = args.as_slice() else {
        anyhow::bail!("usage: bare-axum ADDR ONE_FILE PAGE_FILE");
    };
    let one = std::fs::read(one)?;
    let page = std::fs::read(page)?;
    const XML: [(header::HeaderName, &str); 1] = [(header::CONTENT_TYPE, "application/xml; charset=utf-8")];
    let one = Bytes::from(one);
    let created = one.clone();
    let page = Bytes::from(page);
    let app = Router::new()
        .route(
            "/one",
            get(move || async move { (XML, one.clone()) })
                .post(move |_body: Bytes| async move { (StatusCode::CREATED, XML, created.clone()) }),
        )
        .route("/page", get(move || async move { (XML, page.clone()) }));
    let listener = tokio::net::TcpListener::bind(addr.as_str()).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
