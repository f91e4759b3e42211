//! localstripe and the Stripe proxy as the gateway suites use them: localstripe starts empty
//! and makes objects; the proxy forwards requests on kept-alive connections, loses the answers it
//! is told to lose (the object is made all the same), counts what it forwarded and holds requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rebill_testkit::localstripe::{API_KEY, LocalStripe, StripeProxy, form_encode, stripe_request};

/// The emails of the customers localstripe holds.
fn customer_emails(stripe: &LocalStripe) -> Vec<String> {
    let list = stripe.get_json("/v1/customers?limit=100");
    let data = list["data"].as_array().expect("a list of customers");
    data.iter().filter_map(|customer| customer["email"].as_str().map(str::to_owned)).collect()
}

/// Reads one answer delimited by `Content-Length` from a kept-alive connection: the status and
/// the body.
fn read_answer(reader: &mut BufReader<TcpStream>) -> (u16, String) {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("read the status line");
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status");
    let mut length = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("read a header");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').expect("a header line");
        assert!(!name.eq_ignore_ascii_case("connection"), "a kept-alive answer says nothing of closing: {line}");
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.trim().parse::<usize>().expect("a length"));
        }
    }
    let mut body = vec![0; length.expect("an answer with Content-Length")];
    reader.read_exact(&mut body).expect("read the body");
    (status, String::from_utf8(body).expect("a UTF-8 body"))
}

#[test]
fn localstripe_starts_empty_and_makes_customers() {
    let stripe = LocalStripe::start();
    assert!(stripe.base.starts_with("http://127.0.0.1:"), "{}", stripe.base);
    assert_eq!(customer_emails(&stripe), Vec::<String>::new(), "it starts from scratch");
    let customer = stripe.post_form("/v1/customers", &[("email", "ada@example.com"), ("description", "Ada L.")]);
    let id = customer["id"].as_str().expect("an id");
    assert!(id.starts_with("cus_"), "{customer}");
    let read = stripe.get_json(&format!("/v1/customers/{id}"));
    assert_eq!(read["email"], "ada@example.com");
    assert_eq!(read["description"], "Ada L.");
    assert_eq!(customer_emails(&stripe), ["ada@example.com"]);

    // Without the key it refuses.
    let mut stream = TcpStream::connect(&stripe.addr).expect("connect");
    stream.write_all(b"GET /v1/customers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
}

#[test]
fn two_instances_keep_their_own_objects() {
    let one = LocalStripe::start();
    let two = LocalStripe::start();
    assert_ne!(one.base, two.base);
    one.post_form("/v1/customers", &[("email", "one@example.com")]);
    two.post_form("/v1/customers", &[("email", "two@example.com")]);
    assert_eq!(customer_emails(&one), ["one@example.com"]);
    assert_eq!(customer_emails(&two), ["two@example.com"]);
}

#[test]
fn the_proxy_forwards_requests_on_a_kept_alive_connection() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let mut stream = TcpStream::connect(&proxy.addr).expect("connect to the proxy");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("a read timeout");
    let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
    for email in ["first@example.com", "second@example.com"] {
        let body = form_encode(&[("email", email)]);
        let request = format!(
            "POST /v1/customers HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {API_KEY}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            proxy.addr,
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("send through the proxy");
        let (status, body) = read_answer(&mut reader);
        assert_eq!(status, 200, "{body}");
        let customer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(customer["email"], email);
    }
    let request =
        format!("GET /v1/customers HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {API_KEY}\r\n\r\n", proxy.addr);
    stream.write_all(request.as_bytes()).expect("send through the proxy");
    let (status, body) = read_answer(&mut reader);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("first@example.com") && body.contains("second@example.com"), "{body}");
    assert_eq!(proxy.count("POST", "/v1/customers"), 2);
    assert_eq!(proxy.count("GET", "/v1/customers"), 1);
    assert_eq!(proxy.count("post", "/v1/"), 2, "the method is compared without case");
    assert_eq!(proxy.count("POST", "/v1/charges"), 0);
    assert_eq!(proxy.received("GET", "/"), 1);

    // A request saying `Connection: close` is answered so and closed.
    let (status, body) = stripe_request(&proxy.addr, "GET", "/v1/customers/nope", "").expect("a request");
    assert_eq!(status, 404, "localstripe's own answer passes through: {body}");
}

#[test]
fn a_dropped_answer_closes_the_connection_but_the_object_is_made() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    proxy.drop_answers("POST", "/v1/customers", 1);

    // Another kind of request is not affected.
    let (status, _) = stripe_request(&proxy.addr, "GET", "/v1/customers", "").expect("a request");
    assert_eq!(status, 200);

    let body = form_encode(&[("email", "lost@example.com")]);
    let dropped = stripe_request(&proxy.addr, "POST", "/v1/customers", &body);
    match dropped {
        Err(e) => assert!(
            matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::InvalidData),
            "the connection is closed without an answer: {e}"
        ),
        Ok(answer) => panic!("the answer should have been lost: {answer:?}"),
    }
    // The raw view: not a byte of the answer arrives.
    proxy.drop_answers("POST", "/v1/customers", 1);
    let mut stream = TcpStream::connect(&proxy.addr).expect("connect to the proxy");
    let body = form_encode(&[("email", "lost-too@example.com")]);
    let request = format!(
        "POST /v1/customers HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {API_KEY}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        proxy.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send through the proxy");
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    assert!(answer.is_empty(), "no byte of the answer: {:?}", String::from_utf8_lossy(&answer));
    if let Err(e) = read {
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    }
    assert_eq!(proxy.count("POST", "/v1/customers"), 2, "both were forwarded");

    // localstripe made both customers.
    let emails = customer_emails(&stripe);
    assert!(emails.contains(&"lost@example.com".to_owned()), "{emails:?}");
    assert!(emails.contains(&"lost-too@example.com".to_owned()), "{emails:?}");

    // Only as many as asked are lost.
    let body = form_encode(&[("email", "answered@example.com")]);
    let (status, answer) = stripe_request(&proxy.addr, "POST", "/v1/customers", &body).expect("an answer");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(proxy.count("POST", "/v1/customers"), 3);
    assert_eq!(customer_emails(&stripe).len(), 3);
}

#[test]
fn a_delayed_request_is_held_then_forwarded() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    let delay = Duration::from_millis(1500);
    proxy.delay("POST", "/v1/customers", delay);
    let addr = proxy.addr.clone();
    let started = Instant::now();
    let client = std::thread::spawn(move || {
        let body = form_encode(&[("email", "held@example.com")]);
        stripe_request(&addr, "POST", "/v1/customers", &body).expect("an answer")
    });
    // Wait until the proxy holds it (received, not yet forwarded), polling without a fixed sleep.
    while proxy.received("POST", "/v1/customers") == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the proxy never received the request");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (status, body) = client.join().expect("the client thread");
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() >= delay, "the request was held at least {delay:?}: {:?}", started.elapsed());
    assert_eq!(proxy.count("POST", "/v1/customers"), 1);
    assert_eq!(customer_emails(&stripe), ["held@example.com"]);

    // Other requests are not held, and the rule can be taken away.
    let started = Instant::now();
    let (status, _) = stripe_request(&proxy.addr, "GET", "/v1/customers", "").expect("an answer");
    assert_eq!(status, 200);
    proxy.delay("POST", "/v1/customers", Duration::ZERO);
    let body = form_encode(&[("email", "quick@example.com")]);
    let (status, _) = stripe_request(&proxy.addr, "POST", "/v1/customers", &body).expect("an answer");
    assert_eq!(status, 200);
    assert_eq!(proxy.count("POST", "/v1/customers"), 2);
    assert!(started.elapsed() < delay * 10, "not held again: {:?}", started.elapsed());
}

#[test]
fn a_held_request_is_forwarded_after_its_client_went_away() {
    let stripe = LocalStripe::start();
    let proxy = StripeProxy::start(&stripe.base);
    proxy.delay("POST", "/v1/customers", Duration::from_millis(300));
    let body = form_encode(&[("email", "orphan@example.com")]);
    let request = format!(
        "POST /v1/customers HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {API_KEY}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        proxy.addr,
        body.len()
    );
    let mut stream = TcpStream::connect(&proxy.addr).expect("connect to the proxy");
    stream.write_all(request.as_bytes()).expect("send through the proxy");
    let started = Instant::now();
    while proxy.received("POST", "/v1/customers") == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the proxy never received the request");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(stream);
    while proxy.count("POST", "/v1/customers") == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the held request was never forwarded");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(customer_emails(&stripe), ["orphan@example.com"]);
}

#[test]
fn an_unreachable_upstream_is_answered_502_and_keeps_the_loss_to_come() {
    let port = rebill_testkit::localstripe::free_port();
    let proxy = StripeProxy::start(&format!("http://127.0.0.1:{port}"));
    proxy.drop_answers("GET", "/v1/", 1);
    let (status, body) = stripe_request(&proxy.addr, "GET", "/v1/customers", "").expect("an answer");
    assert_eq!(status, 502, "{body}");
    assert_eq!(proxy.count("GET", "/"), 0);
    assert_eq!(proxy.received("GET", "/"), 1);

    // An upstream on that port now: the next request's answer is the one lost.
    let upstream = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind the upstream's port again");
    let server = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut stream, _) = upstream.accept().expect("a connection from the proxy");
            let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
            let mut line = String::new();
            while reader.read_line(&mut line).expect("a request line") > 2 {
                line.clear();
            }
            let body = "{\"object\": \"list\"}";
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            stream.write_all(answer.as_bytes()).expect("answer the proxy");
        }
    });
    let lost = stripe_request(&proxy.addr, "GET", "/v1/customers", "");
    assert!(lost.is_err(), "the answer is lost: {lost:?}");
    let (status, body) = stripe_request(&proxy.addr, "GET", "/v1/customers", "").expect("an answer");
    assert_eq!((status, body.as_str()), (200, "{\"object\": \"list\"}"));
    assert_eq!(proxy.count("GET", "/"), 2);
    server.join().expect("the upstream's thread");
}
