"""An independent DDS peer for partita's interoperability test: Cyclone DDS's Python binding, with the
Camera type declared in Python. Configuration (loopback only, no multicast) comes from CYCLONEDDS_URI.

    camera_peer.py pub DOMAIN [SECONDS]  write three cameras, then dispose camera 1; stay until the reader
                                         leaves (or SECONDS pass)
    camera_peer.py sub DOMAIN [SECONDS]  print what arrives as JSON lines: three cameras and the dispose of
                                         camera 1 (exit 0), or whatever came within SECONDS (exit 1)
    A fourth argument `nodispose` leaves camera 1 alive (pub) or does not wait for its dispose (sub);
    `unregister` unregisters camera 1 instead of disposing it (pub, its writer without autodispose) and waits
    for camera 1 to be not alive, printing `unregistered` (no writers) or `disposed` (sub).
"""
import json
import sys
import time
from dataclasses import dataclass

from cyclonedds.core import Qos, Policy
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlEnum, IdlStruct
from cyclonedds.idl.annotations import key
import cyclonedds.idl.types as t
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.core import InstanceState


class Mode(IdlEnum, typename="partita::test::Mode"):
    Idle = 0
    Recording = 1


@dataclass
class Position(IdlStruct, typename="partita::test::Position"):
    x: t.float64
    y: t.float64


@dataclass
class Camera(IdlStruct, typename="partita::test::Camera"):
    id: t.uint32
    key("id")
    name: str
    mode: Mode
    at: Position
    frame: t.sequence[t.byte]
    tags: t.sequence[str]


def main():
    role, domain = sys.argv[1], int(sys.argv[2])
    mode = sys.argv[4] if len(sys.argv) > 4 else "dispose"
    dispose = mode != "nodispose"
    qos = Qos(Policy.Reliability.Reliable(max_blocking_time=1_000_000_000), Policy.History.KeepAll,
              Policy.Durability.TransientLocal)
    dp = DomainParticipant(domain)
    topic = Topic(dp, "cameras", Camera, qos=qos)
    deadline = time.time() + (float(sys.argv[3]) if len(sys.argv) > 3 else 20)
    if role == "pub":
        wqos = Qos(Policy.Reliability.Reliable(max_blocking_time=1_000_000_000), Policy.History.KeepAll,
                   Policy.Durability.TransientLocal, Policy.WriterDataLifecycle(autodispose=mode != "unregister"))
        w = DataWriter(dp, topic, qos=wqos)
        while w.get_matched_subscriptions() == [] and time.time() < deadline:
            time.sleep(0.01)
        cams = [Camera(id=i, name=f"py-{i}", mode=Mode.Recording if i % 2 else Mode.Idle,
                       at=Position(x=i * 0.5, y=7.25), frame=bytes([i]) * (10 + i), tags=["py", f"n{i}"])
                for i in range(3)]
        for c in cams:
            w.write(c)
        if mode == "unregister":
            w.unregister_instance(cams[1])
        elif dispose:
            w.dispose(cams[1])
        # Stay until the reader has it all (it exits when done; we see it unmatch).
        while w.get_matched_subscriptions() != [] and time.time() < deadline:
            time.sleep(0.01)
    else:
        r = DataReader(dp, topic, qos=qos)
        seen, disposed = 0, not dispose
        while (seen < 3 or not disposed) and time.time() < deadline:
            for s in r.take(N=16):
                info = s.sample_info
                if info.valid_data:
                    seen += 1
                    print(json.dumps({"id": s.id, "name": s.name, "mode": s.mode.name, "x": s.at.x, "y": s.at.y,
                                      "frame": list(s.frame), "tags": list(s.tags)}), flush=True)
                if info.instance_state == InstanceState.NotAliveDisposed:
                    disposed = True
                    print(json.dumps({"disposed": s.id if info.valid_data else "key-only",
                                      "handle": info.instance_handle}), flush=True)
                if info.instance_state == InstanceState.NotAliveNoWriters and mode == "unregister":
                    disposed = True
                    print(json.dumps({"unregistered": s.id if info.valid_data else "key-only",
                                      "handle": info.instance_handle}), flush=True)
            time.sleep(0.005)
        sys.exit(0 if seen >= 3 and disposed else 1)


if __name__ == "__main__":
    main()
