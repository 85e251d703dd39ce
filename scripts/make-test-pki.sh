#!/usr/bin/env bash
# A test PKI for DDS Security on partita's uplinks (docs/deployment.md, "A secure uplink"), made with openssl:
#
#   scripts/make-test-pki.sh OUTDIR NAME[=TOPIC]...
#
# writes into OUTDIR
#   ca.pem, ca.key                       a self-signed CA, the identity CA and the permissions CA at once
#   governance.xml, governance.p7s       every domain: authenticated participants only, join and read/write
#                                        access control on, discovery, liveliness, metadata and data encrypted
#   NAME.pem, NAME.key                   an identity for each NAME (CN=NAME), signed by the CA
#   NAME.permissions.xml, NAME.permissions.p7s
#                                        NAME may publish and subscribe every topic of domains 0 to 230
#                                        (NAME=TOPIC: only topics matching TOPIC, e.g. monitor=camera/*)
# and prints the [..uplink.security] table of each NAME. NAME is the partition or node that owns the uplink
# (its identity). Run it twice with two OUTDIRs to get a second CA whose identities the first refuses.
# For trying DDS Security in minutes, not for production: the keys are unencrypted and valid for a year.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 OUTDIR NAME[=TOPIC]..." >&2
  exit 2
fi
out=$1
shift
names=()
for arg in "$@"; do
  name=${arg%%=*}
  [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,23}$ ]] || { echo "$0: $name: a name is 1 to 24 of [A-Za-z0-9_-]" >&2; exit 2; }
  [[ $arg != *=* || ${arg#*=} =~ ^[A-Za-z0-9_/*?.-]+$ ]] || { echo "$0: $arg: a topic pattern is [A-Za-z0-9_/*?.-]" >&2; exit 2; }
  names+=("$name")
done
command -v openssl >/dev/null || { echo "$0: openssl is not installed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$out"
tag=$(basename "$out")

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
  -subj "/O=partita test PKI $tag/CN=partita test CA $tag" -keyout ca.key -out ca.pem 2>/dev/null

now=$(date -u +%Y-%m-%dT%H:%M:%S)
later=$(date -u -d '+365 days' +%Y-%m-%dT%H:%M:%S)

cat > governance.xml <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
     xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_governance.xsd">
  <domain_access_rules>
    <domain_rule>
      <domains><id_range><min>0</min><max>230</max></id_range></domains>
      <allow_unauthenticated_participants>false</allow_unauthenticated_participants>
      <enable_join_access_control>true</enable_join_access_control>
      <discovery_protection_kind>ENCRYPT</discovery_protection_kind>
      <liveliness_protection_kind>ENCRYPT</liveliness_protection_kind>
      <rtps_protection_kind>NONE</rtps_protection_kind>
      <topic_access_rules>
        <topic_rule>
          <topic_expression>*</topic_expression>
          <enable_discovery_protection>true</enable_discovery_protection>
          <enable_liveliness_protection>true</enable_liveliness_protection>
          <enable_read_access_control>true</enable_read_access_control>
          <enable_write_access_control>true</enable_write_access_control>
          <metadata_protection_kind>ENCRYPT</metadata_protection_kind>
          <data_protection_kind>ENCRYPT</data_protection_kind>
        </topic_rule>
      </topic_access_rules>
    </domain_rule>
  </domain_access_rules>
</dds>
EOF
openssl smime -sign -in governance.xml -text -out governance.p7s -signer ca.pem -inkey ca.key

for arg in "$@"; do
  name=${arg%%=*}
  topic='*'
  [[ $arg == *=* ]] && topic=${arg#*=}
  subject="/O=partita test PKI $tag/CN=$name"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subject" \
    -keyout "$name.key" -out "$name.csr" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 -out "$name.pem" 2>/dev/null
  rm -f "$name.csr"
  # The subject as DDS Security compares it: the certificate's, in RFC 2253 order.
  dn=$(openssl x509 -in "$name.pem" -noout -subject -nameopt RFC2253 | sed 's/^subject=//')
  cat > "$name.permissions.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
     xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_permissions.xsd">
  <permissions>
    <grant name="$name">
      <subject_name>$dn</subject_name>
      <validity><not_before>$now</not_before><not_after>$later</not_after></validity>
      <allow_rule>
        <domains><id_range><min>0</min><max>230</max></id_range></domains>
        <publish><topics><topic>$topic</topic></topics></publish>
        <subscribe><topics><topic>$topic</topic></topics></subscribe>
      </allow_rule>
      <default>DENY</default>
    </grant>
  </permissions>
</dds>
EOF
  openssl smime -sign -in "$name.permissions.xml" -text -out "$name.permissions.p7s" -signer ca.pem -inkey ca.key
done
rm -f ca.srl
chmod 600 ./*.key

for name in "${names[@]}"; do
  cat <<EOF
# $name
[...uplink.security]
ca = "$out/ca.pem"
certificate = "$out/$name.pem"
private_key = "$out/$name.key"
governance = "$out/governance.p7s"
permissions = "$out/$name.permissions.p7s"
EOF
done
