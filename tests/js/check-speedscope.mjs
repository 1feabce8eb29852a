// Validates a speedscope file against the schema the speedscope package
// ships, and prints each sample's frame names (root first) with its
// weight and the name of its profile. Usage: node check-speedscope.mjs FILE.json. Prints one JSON
// object; exits 1 when the file does not follow the schema.
import Ajv from 'ajv';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const schemaPath = require.resolve('speedscope/dist/release/file-format-schema.json');
const schema = JSON.parse(readFileSync(schemaPath, 'utf8'));
const file = JSON.parse(readFileSync(process.argv[2], 'utf8'));

const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);
if (!validate(file)) {
  console.error(JSON.stringify(validate.errors, null, 2));
  process.exit(1);
}
const names = file.shared.frames.map((f) => f.name);
const samples = file.profiles.flatMap((p) =>
  p.samples.map((s, i) => ({
    frames: s.map((j) => names[j]), weight: p.weights[i], unit: p.unit, profile: p.name,
  })));
console.log(JSON.stringify({ valid: true, samples }));
