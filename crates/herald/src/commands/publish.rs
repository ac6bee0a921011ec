//! `herald publish`: records through the push API's publish stream, each
//! answered with where it was stored.

use std::io::BufRead as _;

use anyhow::{bail, Context as _};
use herald_gateway::proto::{Header, PublishRequest};

use crate::cli::PublishArgs;

/// Runs `herald publish`.
pub async fn run(args: PublishArgs) -> anyhow::Result<()> {
    let values: Vec<String> = if args.values.is_empty() {
        std::io::stdin()
            .lock()
            .lines()
            .collect::<Result<_, _>>()
            .context("reading standard input")?
    } else {
        args.values.clone()
    };
    let mut client = super::push_client::connect(&args.push).await?;
    let headers: Vec<Header> = args
        .headers
        .iter()
        .map(|(k, v)| Header {
            key: k.clone(),
            value: Some(v.clone().into_bytes().into()),
        })
        .collect();
    let requests: Vec<PublishRequest> = values
        .into_iter()
        .enumerate()
        .map(|(i, value)| PublishRequest {
            request_id: i as u64,
            topic: args.topic.clone(),
            key: args.key.as_ref().map(|k| k.clone().into_bytes().into()),
            value: Some(value.into_bytes().into()),
            headers: headers.clone(),
            partition: None,
            timestamp_ms: None,
        })
        .collect();
    let count = requests.len();
    let mut results = client
        .publish_stream(tokio_stream::iter(requests))
        .await
        .context("publishing")?
        .into_inner();
    let mut stored = 0;
    while let Some(result) = results.message().await.context("publishing")? {
        if let Some(error) = result.error {
            bail!("record {} refused: {}", result.request_id, error.message);
        }
        println!("partition {} offset {}", result.partition, result.offset);
        stored += 1;
    }
    if stored != count {
        bail!("{} of {count} records were answered", stored);
    }
    Ok(())
}
