#!/usr/bin/env node
// Checks an OCFL 1.1 storage root for ingestq's tests; prints one line per
// problem and exits 1 when there is any (2 when it cannot run).
//
// Two kinds of checks:
//  - through @ocfl/ocfl-fs, an OCFL implementation independent of ingestq:
//    it opens the storage root (declaration, layout extension and its
//    config), finds the object roots, maps each object's id to its root
//    with its own 0004 layout code, verifies every inventory against its
//    sidecar (root and every version), and resolves every logical path of
//    every version to its content, which is read back and hashed here.
//  - rules of the specification (https://ocfl.io/1.1/spec/, codes from its
//    validation codes) that the library does not check, written here:
//    object and version folder contents, version sequence, manifest and
//    content folders agreeing, no empty folders, no files in the storage
//    hierarchy outside objects.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const ocfl = require('@ocfl/ocfl-fs');

const problems = [];
const problem = (code, where, what) => problems.push(`${code} ${where}: ${what}`);
let objects = 0, versions = 0, files = 0;

async function main(root) {
  root = path.resolve(root);
  const storage = ocfl.storage({ root, workspace: path.join(root, 'extensions', 'workspace') });
  await storage.load(); // throws on a missing declaration
  checkRootFiles(root);
  for await (const obj of storage) {
    objects++;
    await checkObject(storage, root, obj);
  }
  checkHierarchy(root, root);
}

function checkRootFiles(root) {
  const decl = fs.readFileSync(path.join(root, '0=ocfl_1.1'), 'utf8');
  if (decl !== 'ocfl_1.1\n') problem('E080', '0=ocfl_1.1', `holds ${JSON.stringify(decl)}`);
  const layout = JSON.parse(fs.readFileSync(path.join(root, 'ocfl_layout.json'), 'utf8'));
  if (!layout.extension || !layout.description) problem('E070', 'ocfl_layout.json', 'needs extension and description');
}

async function checkObject(storage, root, obj) {
  const rel = path.relative(root, obj.root);
  let inv;
  try {
    inv = await obj.getInventory(); // verifies the root sidecar
  } catch (e) {
    return problem('E060', rel, e.message);
  }
  if (!inv) return problem('E063', rel, 'no inventory.json');
  const data = inv.toJSON();
  if (storage.objectRoot(inv.id) !== rel) problem('E003', rel, `object ${inv.id} belongs at ${storage.objectRoot(inv.id)} by the layout`);
  if (data.type !== 'https://ocfl.io/1.1/spec/#inventory') problem('E038', rel, `type ${data.type}`);
  if (!['sha256', 'sha512'].includes(data.digestAlgorithm)) problem('E025', rel, `digestAlgorithm ${data.digestAlgorithm}`);
  const names = Object.keys(data.versions).sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
  names.forEach((v, i) => { if (v !== `v${i + 1}`) problem('E010', rel, `versions ${names.join(',')} are not v1…vN`); });
  if (data.head !== names[names.length - 1]) problem('E040', rel, `head ${data.head}, last version ${names[names.length - 1]}`);
  const contentDir = data.contentDirectory || 'content';
  checkObjectRootEntries(obj.root, rel, names, data.digestAlgorithm);
  const rootBytes = fs.readFileSync(path.join(obj.root, 'inventory.json'));
  const headBytes = fs.readFileSync(path.join(obj.root, data.head, 'inventory.json'));
  if (!rootBytes.equals(headBytes)) problem('E064', rel, `inventory.json differs from ${data.head}/inventory.json`);
  const manifestPaths = new Set(Object.values(data.manifest).flat());
  for (const p of manifestPaths) {
    if (!fs.existsSync(path.join(obj.root, p))) problem('E092', rel, `manifest names ${p}, which is missing`);
  }
  for (const v of names) {
    versions++;
    await checkVersion(obj, rel, v, data, contentDir, manifestPaths);
  }
}

function checkObjectRootEntries(dir, rel, names, alg) {
  const allowed = new Set(['0=ocfl_object_1.1', 'inventory.json', `inventory.json.${alg}`, 'extensions', 'logs', ...names]);
  for (const e of fs.readdirSync(dir)) if (!allowed.has(e)) problem('E001', rel, `unexpected ${e}`);
  const decl = path.join(dir, '0=ocfl_object_1.1');
  if (!fs.existsSync(decl) || fs.readFileSync(decl, 'utf8') !== 'ocfl_object_1.1\n') problem('E007', rel, 'bad or missing 0=ocfl_object_1.1');
}

async function checkVersion(obj, rel, v, data, contentDir, manifestPaths) {
  const vdir = path.join(obj.root, v);
  for (const e of fs.readdirSync(vdir)) {
    if (![`inventory.json`, `inventory.json.${data.digestAlgorithm}`, contentDir].includes(e)) problem('E015', `${rel}/${v}`, `unexpected ${e}`);
  }
  let vinv;
  try {
    vinv = await obj.getInventory(v); // verifies the version's sidecar
  } catch (e) {
    return problem('E060', `${rel}/${v}`, e.message);
  }
  if (!vinv) problem('W010', `${rel}/${v}`, 'no inventory.json');
  else if (JSON.stringify(vinv.toJSON().versions[v]) !== JSON.stringify(data.versions[v])) problem('E066', `${rel}/${v}`, 'version block differs from the root inventory\'s');
  for (const f of walk(path.join(vdir, contentDir))) {
    const cp = path.relative(obj.root, f).split(path.sep).join('/');
    if (!manifestPaths.has(cp)) problem('E023', rel, `${cp} is not in the manifest`);
  }
  for (const d of emptyDirs(path.join(vdir, contentDir))) problem('E024', rel, `empty folder ${path.relative(obj.root, d)}`);
  for (const f of await obj.files(v)) {
    files++;
    const buf = await f.buffer(); // the library resolves the logical path to its content
    const got = crypto.createHash(data.digestAlgorithm).update(buf).digest('hex');
    if (got !== f.digest) problem('E093', `${rel}/${v}`, `${f.logicalPath} reads back with ${data.digestAlgorithm} ${got}, inventory says ${f.digest}`);
  }
}

// checkHierarchy walks the storage hierarchy: folders down to object roots
// hold no files (E072), and none is empty (E073).
function checkHierarchy(root, dir) {
  const entries = fs.readdirSync(dir, { withFileTypes: true });
  if (entries.length === 0) return problem('E073', path.relative(root, dir), 'empty folder');
  if (entries.some(e => e.name === '0=ocfl_object_1.1')) return;
  for (const e of entries) {
    if (dir === root && (e.isFile() || e.name === 'extensions')) continue; // root files: declaration, layout, texts
    if (e.isDirectory()) checkHierarchy(root, path.join(dir, e.name));
    else problem('E072', path.relative(root, path.join(dir, e.name)), 'a file in the storage hierarchy outside any object');
  }
}

function* walk(dir) {
  if (!fs.existsSync(dir)) return;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* walk(p); else yield p;
  }
}

function emptyDirs(dir) {
  if (!fs.existsSync(dir)) return [];
  const entries = fs.readdirSync(dir, { withFileTypes: true });
  if (entries.length === 0) return [dir];
  return entries.filter(e => e.isDirectory()).flatMap(e => emptyDirs(path.join(dir, e.name)));
}

if (process.argv.length !== 3) {
  console.error('usage: validate.js STORAGE_ROOT');
  process.exit(2);
}
main(process.argv[2]).then(() => {
  for (const p of problems) console.log(p);
  console.log(`${problems.length === 0 ? 'valid' : 'INVALID'}: ${objects} objects, ${versions} versions, ${files} files read back, ${problems.length} problems`);
  process.exit(problems.length === 0 ? 0 : 1);
}, err => {
  for (const p of problems) console.log(p);
  console.log(`INVALID: ${err.message}`);
  process.exit(1);
});
