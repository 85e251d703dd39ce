"""partita's Cyclone DDS probe: the same program as the Fast DDS probe (fastdds/probe.cpp), written with Cyclone
DDS's Python binding (PyPI `cyclonedds`) and the types of idl/partita_interop.idl declared in Python. Its network
configuration is CYCLONEDDS_URI (partita's tests always give one: loopback or a V-NIC, no multicast).

    probe.py pub DOMAIN TOPIC [--keyless] [--wait-readers N] [--linger SECONDS]
    probe.py sub DOMAIN TOPIC [--keyless] [--seconds S]

Same samples, same JSON lines, same exit codes as the Fast DDS probe.
"""
import argparse
import json
import sys
import time
from dataclasses import dataclass

from cyclonedds.core import InstanceState, Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.annotations import key
import cyclonedds.idl.types as t
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic


@dataclass
class KeyedSample(IdlStruct, typename="partita::interop::KeyedSample"):
    id: t.int32
    key("id")
    seq: t.int32
    text: str


@dataclass
class PlainSample(IdlStruct, typename="partita::interop::PlainSample"):
    seq: t.int32
    text: str


def stamp(n):
    """The source timestamp of the n-th write, as the Fast DDS probe's: 1700000000 s + n ms."""
    return 1_700_000_000 * 1_000_000_000 + n * 1_000_000


STATES = {InstanceState.Alive: "alive", InstanceState.NotAliveDisposed: "disposed",
          InstanceState.NotAliveNoWriters: "no_writers"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["pub", "sub"])
    p.add_argument("domain", type=int)
    p.add_argument("topic")
    p.add_argument("--keyless", action="store_true")
    p.add_argument("--wait-readers", type=int, default=0)
    p.add_argument("--linger", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=20.0)
    a = p.parse_args()
    cls = PlainSample if a.keyless else KeyedSample
    reliable = Policy.Reliability.Reliable(max_blocking_time=1_000_000_000)
    dp = DomainParticipant(a.domain)
    topic = Topic(dp, a.topic, cls)
    if a.role == "pub":
        qos = Qos(reliable, Policy.History.KeepAll, Policy.Durability.TransientLocal,
                  Policy.WriterDataLifecycle(autodispose=False))
        w = DataWriter(dp, topic, qos=qos)
        deadline = time.time() + 30
        while len(w.get_matched_subscriptions()) < a.wait_readers:
            if time.time() > deadline:
                print("probe.py: no %d matched readers within 30 s" % a.wait_readers, file=sys.stderr)
                sys.exit(1)
            time.sleep(0.005)
        written = 0
        for i in range(1, 4):
            for s in (1, 2):
                text = "py-%d-%d" % (i, s)
                n = (i - 1) * 2 + s
                w.write(PlainSample(seq=n, text=text) if a.keyless else KeyedSample(id=i, seq=n, text=text),
                        timestamp=stamp(n))
                written += 1
        if not a.keyless:
            w.dispose(KeyedSample(id=2, seq=0, text=""), timestamp=stamp(7))
            w.unregister_instance(KeyedSample(id=3, seq=0, text=""), timestamp=stamp(8))
        print(json.dumps({"event": "written", "samples": written}), flush=True)
        time.sleep(a.linger)
        sys.exit(0)
    qos = Qos(reliable, Policy.History.KeepAll, Policy.Durability.TransientLocal)
    r = DataReader(dp, topic, qos=qos)
    ids, states = {}, {}
    valid = 0

    def done():
        return valid >= 6 and (a.keyless or (states.get(2) == "disposed" and states.get(3) == "no_writers"))

    deadline = time.time() + a.seconds
    while not done() and time.time() < deadline:
        got = r.take(N=1)
        if not got:
            time.sleep(0.002)
            continue
        s = got[0]
        info = s.sample_info
        out = {}
        if not a.keyless:
            if info.valid_data:
                ids[info.instance_handle] = s.id
            out["id"] = ids.get(info.instance_handle)
            if out["id"] is not None:
                states[out["id"]] = STATES.get(info.instance_state)
        valid += 1 if info.valid_data else 0
        if info.valid_data:
            out.update({"seq": s.seq, "text": s.text})
        out.update({"valid": bool(info.valid_data), "state": STATES.get(info.instance_state, str(info.instance_state)),
                    "ts": info.source_timestamp})
        print(json.dumps(out), flush=True)
    sys.exit(0 if done() else 1)


if __name__ == "__main__":
    main()
