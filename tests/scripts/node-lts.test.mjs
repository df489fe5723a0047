// scripts/node-lts: which Node.js the bootstrap uses, and the fetch of an LTS from an npm
// registry, with fake `node`s first on PATH and a local registry standing in for the real one.
// Run: node --test tests/scripts/

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

const root = path.resolve(import.meta.dirname, '../..');
const script = path.join(root, 'scripts/node-lts');
const realNode = process.execPath;
const work = mkdtempSync(path.join(tmpdir(), 'node-lts-test-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** A folder whose `node` says it is `version` and otherwise runs the real node (so npm works). */
function fakeNodeDir(name, version) {
  const dir = path.join(work, name);
  mkdirSync(dir, { recursive: true });
  const node = path.join(dir, 'node');
  writeFileSync(
    node,
    `#!/bin/sh\nif [ "$1" = --version ]; then echo ${version}; exit 0; fi\nexec "${realNode}" "$@"\n`,
  );
  chmodSync(node, 0o755);
  return dir;
}

/** A tools/node folder with a `node` of `version` and an npm. */
function toolsWith(name, version) {
  const tools = path.join(work, name);
  const bin = fakeNodeDir(`${name}/bin`, version);
  writeFileSync(path.join(bin, 'npm'), '#!/bin/sh\nexit 0\n');
  chmodSync(path.join(bin, 'npm'), 0o755);
  return tools;
}

function run(args, env) {
  return new Promise((resolve) => {
    execFile('/bin/bash', [script, ...args], { env, timeout: 120000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (error.code ?? 1) : 0, stdout: stdout.trim(), stderr }),
    );
  });
}

const systemPath = process.env.PATH;
const noTools = path.join(work, 'no-tools');

describe('the decision', () => {
  test('a Node.js older than 20.19 first on PATH is not used: fetch', async () => {
    const old = fakeNodeDir('old', 'v18.19.0');
    const out = await run(['decide'], { PATH: `${old}:${systemPath}`, NODE_TOOLS_DIR: noTools });
    assert.equal(out.stdout, 'fetch');
  });

  test('20.18 is still too old, 20.19 is enough', async () => {
    const almost = fakeNodeDir('almost', 'v20.18.3');
    const enough = fakeNodeDir('enough', 'v20.19.0');
    const env = (dir) => ({ PATH: `${dir}:${systemPath}`, NODE_TOOLS_DIR: noTools });
    assert.equal((await run(['decide'], env(almost))).stdout, 'fetch');
    assert.equal((await run(['decide'], env(enough))).stdout, 'system');
  });

  test('a new enough Node.js first on PATH is used as it is', async () => {
    const current = fakeNodeDir('current', 'v22.12.0');
    const out = await run(['decide'], { PATH: `${current}:${systemPath}`, NODE_TOOLS_DIR: noTools });
    assert.equal(out.stdout, 'system');
  });

  test('no Node.js at all: fetch', async () => {
    // Only what the script itself runs: dirname.
    const bare = path.join(work, 'bare');
    mkdirSync(bare, { recursive: true });
    symlinkSync('/usr/bin/dirname', path.join(bare, 'dirname'));
    const out = await run(['decide'], { PATH: bare, NODE_TOOLS_DIR: noTools });
    assert.equal(out.stdout, 'fetch', out.stderr);
  });

  test('a fetched copy in tools/node is used before an old system Node.js', async () => {
    const old = fakeNodeDir('old2', 'v18.19.0');
    const tools = toolsWith('tools-good', 'v24.22.3');
    const out = await run(['decide'], { PATH: `${old}:${systemPath}`, NODE_TOOLS_DIR: tools });
    assert.equal(out.stdout, 'tools');
  });

  test('a minimum given (the conformance suite\'s 22): 20.19 no longer does, 22.0 does', async () => {
    const ui = fakeNodeDir('ui-enough', 'v20.19.0');
    const lts22 = fakeNodeDir('lts22', 'v22.0.0');
    const env = (dir) => ({ PATH: `${dir}:${systemPath}`, NODE_TOOLS_DIR: noTools });
    assert.equal((await run(['decide', '22'], env(ui))).stdout, 'fetch');
    assert.equal((await run(['decide', '22'], env(lts22))).stdout, 'system');
    assert.equal((await run(['decide', '22.1'], env(lts22))).stdout, 'fetch');
    // A fetched LTS in the folder named for it does.
    const tools = toolsWith('tools-22', 'v24.22.3');
    const out = await run(['decide', '22'], { PATH: `${ui}:${systemPath}`, NODE_TOOLS_DIR: tools });
    assert.equal(out.stdout, 'tools');
  });

  test('a minimum that is not a version, or newer than the LTS fetched, is refused', async () => {
    for (const bad of ['x', '22.', '99']) {
      const out = await run(['decide', bad], { PATH: systemPath, NODE_TOOLS_DIR: noTools });
      assert.equal(out.code, 2, bad);
      assert.equal(out.stdout, '', bad);
    }
  });

  test('a tools/node that is itself too old is fetched again', async () => {
    const old = fakeNodeDir('old3', 'v18.19.0');
    const tools = toolsWith('tools-old', 'v16.20.2');
    const out = await run(['decide'], { PATH: `${old}:${systemPath}`, NODE_TOOLS_DIR: tools });
    assert.equal(out.stdout, 'fetch');
  });
});

describe('the fetch, from a local npm registry', () => {
  const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  const platform = `node-linux-${arch}`;
  let server;
  let registry;
  let tamper = false;
  const tarballs = {};

  /** A package tarball (package/…) holding `files`, and its npm integrity string. */
  async function pack(name, files) {
    const dir = path.join(work, `pkg-${name}`);
    for (const [file, [text, mode]] of Object.entries(files)) {
      const full = path.join(dir, 'package', file);
      mkdirSync(path.dirname(full), { recursive: true });
      writeFileSync(full, text);
      chmodSync(full, mode);
    }
    const tgz = path.join(work, `${name}.tgz`);
    await new Promise((resolve, reject) =>
      execFile('tar', ['-czf', tgz, '-C', dir, 'package'], (e) => (e ? reject(e) : resolve())),
    );
    const bytes = readFileSync(tgz);
    return { bytes, integrity: `sha512-${createHash('sha512').update(bytes).digest('base64')}` };
  }

  function packument(name, version, integrity) {
    return {
      name,
      'dist-tags': { latest: version },
      versions: {
        [version]: {
          name,
          version,
          dist: { tarball: `${registry}${name}/-/${name}-${version}.tgz`, integrity },
        },
      },
    };
  }

  before(async () => {
    tarballs[platform] = {
      version: '24.99.1',
      ...(await pack(platform, {
        'bin/node': [
          `#!/bin/sh\nif [ "$1" = --version ]; then echo v24.99.1; exit 0; fi\nexec "${realNode}" "$@"\n`,
          0o755,
        ],
        'package.json': [JSON.stringify({ name: platform, version: '24.99.1' }), 0o644],
      })),
    };
    tarballs.npm = {
      version: '11.99.0',
      ...(await pack('npm', {
        'bin/npm-cli.js': ['#!/usr/bin/env node\nconsole.log("11.99.0");\n', 0o755],
        'bin/npx-cli.js': ['#!/usr/bin/env node\n', 0o755],
        'package.json': [JSON.stringify({ name: 'npm', version: '11.99.0' }), 0o644],
      })),
    };
    server = http.createServer((req, res) => {
      const name = decodeURIComponent(req.url.slice(1)).split('/-/')[0];
      const pkg = tarballs[name];
      if (!pkg) {
        res.writeHead(404).end('{}');
      } else if (req.url.includes('/-/')) {
        const bytes = Buffer.from(pkg.bytes);
        if (tamper && name === platform) bytes[bytes.length - 1] ^= 0xff;
        res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(bytes);
      } else {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify(packument(name, pkg.version, pkg.integrity)));
      }
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    registry = `http://127.0.0.1:${server.address().port}/`;
  });
  after(() => server?.close());

  function env(tools, name) {
    return {
      PATH: `${fakeNodeDir(name, 'v18.19.0')}:${systemPath}`,
      HOME: work,
      NODE_TOOLS_DIR: tools,
      npm_config_registry: registry,
      npm_config_cache: path.join(work, `cache-${name}`),
      npm_config_update_notifier: 'false',
      // A refused tarball fails at once rather than after npm's retries.
      npm_config_fetch_retries: '0',
    };
  }

  test('with an old Node.js first on PATH, ensure lays out the LTS and npm in tools/node', async () => {
    const tools = path.join(work, 'fetched/node');
    const out = await run(['ensure'], env(tools, 'old-fetch'));
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /using Node\.js v24\.99\.1/);
    const node = path.join(tools, 'bin/node');
    const version = await new Promise((resolve) =>
      execFile(node, ['--version'], (_, stdout) => resolve(stdout.trim())),
    );
    assert.equal(version, 'v24.99.1');
    assert.equal(readlinkSync(path.join(tools, 'bin/npm')), '../lib/node_modules/npm/bin/npm-cli.js');
    assert.ok(existsSync(path.join(tools, 'lib/node_modules/npm/bin/npm-cli.js')));
    // And the next run uses it without fetching.
    const again = await run(['decide'], env(tools, 'old-again'));
    assert.equal(again.stdout, 'tools');
  });

  test('with a minimum, ensure fetches into the folder given even when the UI\'s Node.js would do', async () => {
    const tools = path.join(work, 'fetched/node22');
    const environment = env(tools, 'ui-node');
    environment.PATH = `${fakeNodeDir('ui-node-20', 'v20.19.0')}:${systemPath}`;
    const out = await run(['ensure', '22'], environment);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /using Node\.js v24\.99\.1/);
    assert.equal((await run(['decide', '22'], environment)).stdout, 'tools');
    // The UI's decision is unchanged: the Node.js on PATH still does for it.
    environment.NODE_TOOLS_DIR = noTools;
    assert.equal((await run(['decide'], environment)).stdout, 'system');
  });

  test('a tarball that does not match the registry integrity is refused and nothing is installed', async () => {
    const tools = path.join(work, 'tampered/node');
    tamper = true;
    try {
      const out = await run(['ensure'], env(tools, 'old-tampered'));
      assert.notEqual(out.code, 0, 'ensure must fail');
      assert.match(out.stderr, /integrity|EINTEGRITY|sha512/i);
      assert.ok(!existsSync(tools), 'no tools/node from a tampered download');
    } finally {
      tamper = false;
    }
  });
});
