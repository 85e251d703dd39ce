//! Cyclone DDS 11 through partita's own layer (`partita-dds`): typed topics of paper 002's IDL, XCDR1.
//! Under the supervisor the participant takes the configuration the supervisor wrote (`CYCLONEDDS_URI`: the
//! node's V-NIC, unicast peers, no multicast); outside it, loopback only. Reads wait on Cyclone's waitsets.
use crate::agent::channel::{Channel, ChannelConfig, Durability, History, Matched, Reliability};
use crate::agent::AgentError;
use partita_dds::{DomainConfig, Participant, Qos, Reader, Topic, TopicType, Writer};
use serde::{Deserialize, Serialize};
use std::time::Duration;

const IMPL: &str = "cyclone";

/// `struct PubMessage { long seqnum; sequence<octet, 16384> data; }`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PubMessage {
    pub seqnum: i32,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// `struct AckMessage { long seqnum; }`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AckMessage {
    pub seqnum: i32,
}

impl TopicType for PubMessage {
    fn type_name() -> &'static str {
        "PubMessage"
    }
}

impl TopicType for AckMessage {
    fn type_name() -> &'static str {
        "AckMessage"
    }
}

/// The test's QoS in partita-dds terms.
pub fn qos(cfg: &ChannelConfig) -> Qos {
    let q = match cfg.qos.reliability {
        Reliability::Reliable => Qos::reliable(),
        Reliability::BestEffort => Qos::best_effort(),
    };
    let q = match cfg.qos.history {
        History::KeepAll => q.keep_all(),
        History::KeepLast(n) => q.keep_last(n),
    };
    match cfg.qos.durability {
        Durability::Volatile => q,
        Durability::TransientLocal => q.transient_local(),
    }
}

struct Cyclone {
    // Declared first so the endpoints go before the participant.
    pub_writer: Option<Writer<PubMessage>>,
    pub_reader: Option<Reader<PubMessage>>,
    ack_writer: Option<Writer<AckMessage>>,
    ack_reader: Option<Reader<AckMessage>>,
    _participant: Participant,
}

fn err(what: &str) -> impl Fn(partita_dds::DdsError) -> AgentError + '_ {
    move |e| AgentError::middleware(IMPL, what, e)
}

pub fn open(cfg: &ChannelConfig) -> Result<Box<dyn Channel>, AgentError> {
    let config = match DomainConfig::from_environment() {
        Some(c) => c.map_err(err("the supervisor's configuration"))?,
        None => DomainConfig::loopback(cfg.domain),
    };
    let participant = Participant::new(&config).map_err(err("participant"))?;
    let q = qos(cfg);
    let pub_topic = Topic::<PubMessage>::new(&participant, &cfg.pub_topic(), &q).map_err(err("PubMessage topic"))?;
    let ack_topic = Topic::<AckMessage>::new(&participant, &cfg.ack_topic(), &q).map_err(err("AckMessage topic"))?;
    let e = cfg.ends;
    Ok(Box::new(Cyclone {
        pub_writer: if e.pub_writer { Some(Writer::new(&pub_topic, &q).map_err(err("PubMessage writer"))?) } else { None },
        pub_reader: if e.pub_reader { Some(Reader::new(&pub_topic, &q).map_err(err("PubMessage reader"))?) } else { None },
        ack_writer: if e.ack_writer { Some(Writer::new(&ack_topic, &q).map_err(err("AckMessage writer"))?) } else { None },
        ack_reader: if e.ack_reader { Some(Reader::new(&ack_topic, &q).map_err(err("AckMessage reader"))?) } else { None },
        _participant: participant,
    }))
}

fn missing(what: &str) -> AgentError {
    AgentError::middleware(IMPL, what, "this role has no such endpoint")
}

impl Channel for Cyclone {
    fn write_pub(&mut self, seq: i32, data: &[u8]) -> Result<(), AgentError> {
        let w = self.pub_writer.as_ref().ok_or_else(|| missing("PubMessage writer"))?;
        w.write(&PubMessage { seqnum: seq, data: data.to_vec() }).map_err(err("PubMessage write"))
    }

    fn take_pub(&mut self, timeout: Duration, f: &mut dyn FnMut(i32, usize)) -> Result<usize, AgentError> {
        let r = self.pub_reader.as_ref().ok_or_else(|| missing("PubMessage reader"))?;
        let samples = r.take_wait(timeout).map_err(err("PubMessage take"))?;
        let mut n = 0;
        for s in samples.into_iter().filter_map(|s| s.value) {
            f(s.seqnum, s.data.len());
            n += 1;
        }
        Ok(n)
    }

    fn write_ack(&mut self, seq: i32) -> Result<(), AgentError> {
        let w = self.ack_writer.as_ref().ok_or_else(|| missing("AckMessage writer"))?;
        w.write(&AckMessage { seqnum: seq }).map_err(err("AckMessage write"))
    }

    fn take_ack(&mut self, timeout: Duration, f: &mut dyn FnMut(i32)) -> Result<usize, AgentError> {
        let r = self.ack_reader.as_ref().ok_or_else(|| missing("AckMessage reader"))?;
        let samples = r.take_wait(timeout).map_err(err("AckMessage take"))?;
        let mut n = 0;
        for s in samples.into_iter().filter_map(|s| s.value) {
            f(s.seqnum);
            n += 1;
        }
        Ok(n)
    }

    fn matched(&mut self) -> Result<Matched, AgentError> {
        let mut m = Matched::default();
        if let Some(w) = &self.pub_writer {
            m.pub_readers = w.matched_readers().map_err(err("PubMessage writer's matches"))?;
        }
        if let Some(r) = &self.pub_reader {
            m.pub_writers = r.matched_writers().map_err(err("PubMessage reader's matches"))?;
        }
        if let Some(w) = &self.ack_writer {
            m.ack_readers = w.matched_readers().map_err(err("AckMessage writer's matches"))?;
        }
        if let Some(r) = &self.ack_reader {
            m.ack_writers = r.matched_writers().map_err(err("AckMessage reader's matches"))?;
        }
        Ok(m)
    }
}
