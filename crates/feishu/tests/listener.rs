//! A hostile local process against the loopback listener: idle connections cannot tie it up, no
//! connection outlives it, and the browser's page tells the truth about the sign-in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use feishu::listener::{Answer, HEADER_TIMEOUT, MAX_CONNECTIONS};
use feishu::{CallbackOutcome, LoopbackListener};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Reads until the peer closes; `true` if it did within `within`.
async fn closed_by_peer(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// A raw GET, as a browser would send it, answered in full.
async fn get(port: u16, target: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream
        .write_all(
            format!("GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn the_callback_lands_with_a_thousand_idle_connections_held_open() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let port = listener.port();
    let waiting = tokio::spawn(async move { listener.wait("st", Duration::from_secs(60)).await });
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    let page = tokio::time::timeout(
        Duration::from_secs(30),
        get(port, "/callback?code=c0de&state=st"),
    )
    .await
    .expect("the callback was not answered while idle connections were held");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert_eq!(
        waiting.await.unwrap().unwrap(),
        CallbackOutcome::Code("c0de".into())
    );
    // The listener has ended: every connection still held is closed, none served on.
    let mut still_open = 0;
    for stream in &mut idle {
        if !closed_by_peer(stream, Duration::from_secs(5)).await {
            still_open += 1;
        }
    }
    assert_eq!(still_open, 0, "connections outlived the listener");
    const { assert!(MAX_CONNECTIONS < 1000) };
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let port = listener.port();
    let waiting = tokio::spawn(async move { listener.wait("st", Duration::from_secs(60)).await });
    let mut silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    // Half a request head, then nothing (slowloris).
    let mut slow = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    slow.write_all(b"GET /callback?state=st HTTP/1.1\r\nHost: 127.0.0.1")
        .await
        .unwrap();
    let within = HEADER_TIMEOUT + Duration::from_secs(5);
    assert!(
        closed_by_peer(&mut silent, within).await,
        "a silent connection was kept"
    );
    assert!(
        closed_by_peer(&mut slow, within).await,
        "a slow request head was kept"
    );
    // The listener itself is still waiting for the real callback.
    assert!(!waiting.is_finished());
    let page = get(port, "/callback?code=c&state=st").await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    waiting.await.unwrap().unwrap();
}

#[tokio::test]
async fn when_the_listener_is_dropped_its_connections_end_with_it() {
    let listener = LoopbackListener::bind(0).await.unwrap();
    let port = listener.port();
    let waiting = tokio::spawn(async move { listener.wait("st", Duration::from_secs(60)).await });
    let mut held = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    // A request in progress: its handler is waiting, as a callback does for the exchange.
    let mut busy = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    busy.write_all(format!("GET /other HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    waiting.abort();
    let _ = waiting.await;
    assert!(closed_by_peer(&mut held, Duration::from_secs(3)).await);
    assert!(closed_by_peer(&mut busy, Duration::from_secs(3)).await);
    assert!(
        LoopbackListener::bind(port).await.is_ok(),
        "the port is free again"
    );
}

#[tokio::test]
async fn the_page_says_signed_in_only_after_the_exchange_and_otherwise_what_went_wrong() {
    for (answer, status, says) in [
        (Answer::SignedIn, "200", "登录成功"),
        (
            Answer::Failed("Feishu rejected the code (20003 invalid_grant)".into()),
            "502",
            "20003 invalid_grant",
        ),
        (Answer::Declined, "200", "取消"),
    ] {
        let listener = LoopbackListener::bind(0).await.unwrap();
        let port = listener.port();
        let waiting =
            tokio::spawn(async move { listener.callback("st", Duration::from_secs(30)).await });
        let browser = tokio::spawn(async move { get(port, "/callback?code=c&state=st").await });
        let callback = waiting.await.unwrap().unwrap();
        // Until the app answers, the browser has no page.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!browser.is_finished(), "the page came before the exchange");
        callback.answer(answer).await;
        let page = browser.await.unwrap();
        assert!(page.starts_with(&format!("HTTP/1.1 {status}")), "{page}");
        assert!(page.contains(says), "{page}");
        if status == "502" {
            assert!(!page.contains("登录成功"), "{page}");
        }
    }
    // A callback the app drops unanswered tells the browser it did not complete.
    let listener = LoopbackListener::bind(0).await.unwrap();
    let port = listener.port();
    let waiting =
        tokio::spawn(async move { listener.callback("st", Duration::from_secs(30)).await });
    let browser = tokio::spawn(async move { get(port, "/callback?code=c&state=st").await });
    drop(waiting.await.unwrap().unwrap());
    let page = browser.await.unwrap();
    assert!(page.contains("登录没有完成"), "{page}");
}
