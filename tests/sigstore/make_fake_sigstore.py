#!/usr/bin/env python3
"""Writes a fake Sigstore into testdata/sigstore/: a Fulcio-like CA (root and
intermediate) that issued a short-lived leaf certificate (email SAN and the
OIDC issuer extensions), a Rekor-like EC log key, trusted_root.json naming
them, a model file, and keyless bundles of it whose log entry (dsse 0.0.1) is
built and signed here: one good bundle per form, and one per tampering that
verify must refuse. Needs Python's `cryptography`. The files are committed;
run again only to change them:  python3 tests/sigstore/make_fake_sigstore.py
"""
import base64, datetime, hashlib, json, os, sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "sigstore")
T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
IDENTITY, ISSUER = "signer@example.com", "https://issuer.example"
b64 = lambda b: base64.b64encode(b).decode()
sha = lambda b: hashlib.sha256(b).digest()
der = lambda c: c.public_bytes(serialization.Encoding.DER)
spki = lambda k: k.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def key(seed):  # deterministic keys, so regenerating changes only what changed
    return ec.derive_private_key(int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big") % (2**250), ec.SECP256R1())


def cert(subject, issuer_name, public, signer, start, end, ca, extra=()):
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name).public_key(public)
         .serial_number(int.from_bytes(sha(repr(subject).encode())[:8], "big")).not_valid_before(start).not_valid_after(end)
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
    for ext, critical in extra:
        b = b.add_extension(ext, critical=critical)
    return b.sign(signer, hashes.SHA256())


def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fake-sigstore"), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def utf8_der(text):
    raw = text.encode()
    return bytes([0x0C, len(raw)]) + raw


def make_ca(tag):
    root_key, inter_key = key(tag + "root"), key(tag + "intermediate")
    root = cert(name(tag + " root"), name(tag + " root"), root_key.public_key(), root_key,
                datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc), datetime.datetime(2040, 1, 1, tzinfo=datetime.timezone.utc), True)
    inter = cert(name(tag + " intermediate"), root.subject, inter_key.public_key(), root_key,
                 datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc), datetime.datetime(2040, 1, 1, tzinfo=datetime.timezone.utc), True)
    return root, inter, inter_key


def leaf_cert(inter, inter_key, leaf_key):
    extra = [
        (x509.KeyUsage(True, False, False, False, False, False, False, False, False), True),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), False),
        (x509.SubjectAlternativeName([x509.RFC822Name(IDENTITY)]), True),
        (x509.UnrecognizedExtension(x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1"), ISSUER.encode()), False),
        (x509.UnrecognizedExtension(x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8"), utf8_der(ISSUER)), False),
    ]
    return cert(x509.Name([]), inter.subject, leaf_key.public_key(), inter_key, T0, T0 + datetime.timedelta(minutes=10), False, extra)


def trusted_root(cas, rekor_key, ca_end=None):
    authorities = []
    for root, inter in cas:
        valid = {"start": "2020-01-01T00:00:00Z"}
        if ca_end:
            valid["end"] = ca_end
        authorities.append({"subject": {"organization": "fake-sigstore", "commonName": "fake"}, "uri": "https://fulcio.example",
                            "certChain": {"certificates": [{"rawBytes": b64(der(inter))}, {"rawBytes": b64(der(root))}]},
                            "validFor": valid})
    return {"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [{"baseUrl": "https://rekor.example", "hashAlgorithm": "SHA2_256",
                       "publicKey": {"rawBytes": b64(spki(rekor_key)), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                     "validFor": {"start": "2020-01-01T00:00:00Z"}},
                       "logId": {"keyId": b64(sha(spki(rekor_key)))}}],
            "certificateAuthorities": authorities, "ctlogs": [], "timestampAuthorities": []}


def pae(payload):
    t = b"application/vnd.in-toto+json"
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def merkle(leaves, index):  # RFC 6962: the root of `leaves` and the inclusion proof of leaves[index]
    if len(leaves) == 1:
        return sha(b"\0" + leaves[0]), []
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    if index < k:
        root_l, proof = merkle(leaves[:k], index)
        root_r, _ = merkle(leaves[k:], 0)
        return sha(b"\1" + root_l + root_r), proof + [root_r]
    root_l, _ = merkle(leaves[:k], 0)
    root_r, proof = merkle(leaves[k:], index - k)
    return sha(b"\1" + root_l + root_r), proof + [root_l]


def entry(body, rekor_key, set_key, integrated, proof_hashes_edit=None, with_set=True, with_proof=True):
    log_id = sha(spki(rekor_key))
    out = {"logIndex": "1234", "logId": {"keyId": b64(log_id)}, "kindVersion": {"kind": "dsse", "version": "0.0.1"},
           "integratedTime": str(integrated)}
    if with_set:
        payload = json.dumps({"body": b64(body), "integratedTime": integrated, "logID": log_id.hex(), "logIndex": 1234},
                             sort_keys=True, separators=(",", ":")).encode()
        out["inclusionPromise"] = {"signedEntryTimestamp": b64(set_key.sign(payload, ec.ECDSA(hashes.SHA256())))}
    if with_proof:
        leaves = [b"leaf %d" % i for i in range(7)]
        leaves[5] = body
        root, hashes_ = merkle(leaves, 5)
        if proof_hashes_edit:
            hashes_ = proof_hashes_edit(hashes_)
        note = b"rekor.example - 42\n7\n" + b64(root).encode() + b"\n"
        sig = rekor_key.sign(note, ec.ECDSA(hashes.SHA256()))
        checkpoint = note + b"\n" + "\u2014 rekor.example ".encode() + b64(log_id[:4] + sig).encode() + b"\n"
        out["inclusionProof"] = {"logIndex": "5", "rootHash": b64(root), "treeSize": "7",
                                 "hashes": [b64(h) for h in hashes_], "checkpoint": {"envelope": checkpoint.decode()}}
    out["canonicalizedBody"] = b64(body)
    return out


def dsse_body(payload, signature, leaf, payload_hash=None):
    envelope = json.dumps({"payload": b64(payload), "payloadType": "application/vnd.in-toto+json",
                           "signatures": [{"sig": b64(signature)}]}, separators=(",", ":")).encode()
    spec = {"envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(envelope).hexdigest()},
            "payloadHash": {"algorithm": "sha256", "value": payload_hash or hashlib.sha256(payload).hexdigest()},
            "signatures": [{"signature": b64(signature), "verifier": b64(leaf.public_bytes(serialization.Encoding.PEM))}]}
    return json.dumps({"apiVersion": "0.0.1", "kind": "dsse", "spec": spec}, separators=(",", ":")).encode()


def bundle(payload, signature, leaf, tlog, version="0.3", chain=None):
    material = {"tlogEntries": [tlog]}
    if version == "0.3":
        material["certificate"] = {"rawBytes": b64(der(leaf))}
        media = "application/vnd.dev.sigstore.bundle.v0.3+json"
    else:
        material["x509CertificateChain"] = {"certificates": [{"rawBytes": b64(der(c))} for c in [leaf] + (chain or [])]}
        media = "application/vnd.dev.sigstore.bundle+json;version=" + version
    return {"mediaType": media, "verificationMaterial": material,
            "dsseEnvelope": {"payload": b64(payload), "payloadType": "application/vnd.in-toto+json",
                             "signatures": [{"sig": b64(signature), "keyid": ""}]}}


def statement(model):
    digest = hashlib.sha256(model).hexdigest()
    return json.dumps({"_type": "https://in-toto.io/Statement/v1",
                       "subject": [{"name": "model.bin", "digest": {"sha256": hashlib.sha256(bytes.fromhex(digest)).hexdigest()}}],
                       "predicateType": "https://model_signing/signature/v1.0",
                       "predicate": {"serialization": {"method": "files", "hash_type": "sha256", "allow_symlinks": False},
                                     "resources": [{"name": ".", "algorithm": "sha256", "digest": digest}]}}, indent=2).encode()


def main():
    os.makedirs(OUT, exist_ok=True)
    write = lambda n, doc: open(os.path.join(OUT, n), "w").write(json.dumps(doc, indent=1) + "\n")
    model = b"a model signed with a fake Sigstore\n"
    open(os.path.join(OUT, "model.bin"), "wb").write(model)
    root, inter, inter_key = make_ca("fulcio")
    other_root, other_inter, _ = make_ca("other")
    leaf_key, rekor_key, other_key = key("leaf"), key("rekor"), key("not rekor")
    leaf = leaf_cert(inter, inter_key, leaf_key)
    write("trusted_root.json", trusted_root([(root, inter)], rekor_key))
    write("trusted_root_other_ca.json", trusted_root([(other_root, other_inter)], rekor_key))
    write("trusted_root_ca_expired.json", trusted_root([(root, inter)], rekor_key, ca_end="2024-12-31T23:59:59.999Z"))
    payload = statement(model)
    signature = leaf_key.sign(pae(payload), ec.ECDSA(hashes.SHA256()))
    body = dsse_body(payload, signature, leaf)
    t = int(T0.timestamp()) + 60
    write("good.sigstore.json", bundle(payload, signature, leaf, entry(body, rekor_key, rekor_key, t)))
    write("proof_only_no_time.sigstore.json",  # refused: no signed time
          bundle(payload, signature, leaf, entry(body, rekor_key, rekor_key, t, with_set=False), "0.2", [inter]))
    write("good_v01_set_only.sigstore.json",
          bundle(payload, signature, leaf, entry(body, rekor_key, rekor_key, t, with_proof=False), "0.1"))
    write("time_outside_certificate.sigstore.json", bundle(payload, signature, leaf, entry(body, rekor_key, rekor_key, t + 3600)))
    write("set_other_key.sigstore.json", bundle(payload, signature, leaf, entry(body, rekor_key, other_key, t)))
    changed = dsse_body(payload, signature, leaf, payload_hash="0" * 64)
    tampered = entry(body, rekor_key, rekor_key, t)
    tampered["canonicalizedBody"] = b64(changed)
    write("body_modified.sigstore.json", bundle(payload, signature, leaf, tampered))
    write("body_other_payload.sigstore.json", bundle(payload, signature, leaf, entry(changed, rekor_key, rekor_key, t)))
    flip = lambda hs: [hs[0][:-1] + bytes([hs[0][-1] ^ 1])] + hs[1:]
    write("proof_wrong_hash.sigstore.json",
          bundle(payload, signature, leaf, entry(body, rekor_key, rekor_key, t, proof_hashes_edit=flip, with_set=False)))
    other_payload = payload.replace(b"model.bin", b"other.bin")
    write("statement_changed.sigstore.json",
          bundle(other_payload, signature, leaf, entry(dsse_body(other_payload, signature, leaf), rekor_key, rekor_key, t)))


if __name__ == "__main__":
    sys.exit(main())
