// Decodes a gzipped pprof profile with Datadog's pprof-format, a reader
// written apart from offwake-perf, and prints its sample types and each
// sample's frames (root first), values and labels. Usage: node
// decode-pprof.mjs FILE.pb.gz. Prints one JSON object.
import { Profile } from 'pprof-format';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

const profile = Profile.decode(gunzipSync(readFileSync(process.argv[2])));
const str = (i) => profile.stringTable.strings[Number(i)];
const functions = new Map(profile.function.map((f) => [Number(f.id), str(f.name)]));
const locations = new Map(profile.location.map((l) => [
  Number(l.id), l.line.map((line) => functions.get(Number(line.functionId))),
]));
const samples = profile.sample.map((s) => ({
  // Leaf first in the profile: reversed to read as the folded line.
  frames: s.locationId.map((id) => locations.get(Number(id))).flat().reverse(),
  values: s.value.map(Number),
  labels: Object.fromEntries(s.label.map((l) => [
    str(l.key), Number(l.str) !== 0 ? str(l.str) : Number(l.num)])),
}));
console.log(JSON.stringify({
  sampleTypes: profile.sampleType.map((t) => [str(t.type), str(t.unit)]),
  samples,
}));
