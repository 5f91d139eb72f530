// Snapshots of a Harness session's cwd for a governor that shares no disk with the agent
// (rules §10.1 and §11): the tree computed here with the server's ids, byte for byte, the
// blobs the server lacks uploaded, then the manifest (only the changes over the last snapshot
// this plugin sent, when there is one).
//
// The tree is what the server's `governor/domain/tree.py` computes (and stock git, §10.1): every
// regular file and symlink under the root except the top-level `.git` and `.governor` and the
// project's exclusions (`GET /project`); blob ids sha256("blob <size>\0" + bytes); mode 100755
// when the owner exec bit is set, else 100644; 120000 for a symlink, whose blob is its text
// (never followed); git tree objects, entries sorted as git sorts them (a directory as if its name
// ended with "/"), empty directories absent; written `gittree:sha256:<64 hex>`. Whatever the
// server refuses to hash is refused here too, naming the path: FIFOs, sockets, devices, a nested
// `.git`, names git refuses, names that are not UTF-8, a file that changes while it is read
// (after one more read), an exclusion that passes through a symlink, trees over the caps.

import { createHash } from 'node:crypto'
import { constants } from 'node:fs'
import { lstat, open, readdir, readlink } from 'node:fs/promises'
import { join } from 'node:path'
import { GovernorError } from './client.js'

export const TREE_ID_PREFIX = 'gittree:sha256:'
export const MODES = ['100644', '100755', '120000']
export const MISSING_PER_REQUEST = 10_000
// Blobs under LARGE_BLOB bytes travel in batches (`POST /blobs`) of at most BATCH_BYTES and
// BATCH_BLOBS (or the server's caps, if lower); larger ones one `PUT` each.
export const LARGE_BLOB = 1024 * 1024
export const BATCH_BYTES = 4 * 1024 * 1024
export const BATCH_BLOBS = 1000
const SKIPPED_AT_TOP = new Set(['.git', '.governor'])
const MAX_DEPTH = 256
const READ_CHUNK = 1 << 20
const OPEN_FILE = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK
const CHANGED = 'changed while it was being hashed'
const UTF8 = new TextDecoder('utf-8', { fatal: true })
const EMPTY_TREE = createHash('sha256').update('tree 0\0').digest()

/** The tree cannot be hashed or uploaded; `path` names the entry to blame ('' for the root). */
export class TreeError extends GovernorError {
  constructor(path, reason) {
    super(path ? `${JSON.stringify(path)}: ${reason}` : reason, { status: 0, code: 'TREE' })
    this.name = 'TreeError'
    this.path = path
    this.reason = reason
  }

  // Hashing the same files again fails the same way (a changed file aside): not a network error.
  get retryable() {
    return false
  }
}

/** The git blob id (SHA-256 object format) of `data`, as 64 hex digits. */
export function blobId(data) {
  return createHash('sha256').update(`blob ${data.length}\0`).update(data).digest('hex')
}

// --- exclusions (git pathspec globs, the subset the server accepts) ---------------------------
// Matching runs over the path's UTF-8 bytes, one string character per byte (latin1), as the
// server matches bytes: `?` is one byte, classes are ASCII.

const hex = (byte) => `\\x${byte.toString(16).padStart(2, '0')}`
const bytesOf = (text) => Buffer.from(text, 'utf8')

function classRegex(pattern, start) {
  let i = start + 1
  const negated = i < pattern.length && '!^'.includes(pattern[i])
  if (negated) i += 1
  const members = new Set()
  let previous = null
  let first = true
  while (i < pattern.length && (first || pattern[i] !== ']')) {
    const char = pattern[i]
    if (char.charCodeAt(0) > 127) return { reason: 'a character class may hold only ASCII characters' }
    if (char === '[' && pattern[i + 1] === ':') return { reason: 'POSIX character classes ([:alpha:]) are not supported' }
    if (char === '-' && previous !== null && i + 1 < pattern.length && pattern[i + 1] !== ']') {
      const high = pattern.charCodeAt(i + 1)
      if (high > 127) return { reason: 'a character class may hold only ASCII characters' }
      for (let c = previous; c <= high; c++) members.add(c)
      previous = null
      i += 2
    } else {
      members.add(char.charCodeAt(0))
      previous = char.charCodeAt(0)
      i += 1
    }
    first = false
  }
  if (i >= pattern.length) return { reason: "a '[' opens a character class that is never closed" }
  const matched = []
  for (let byte = 0; byte < 256; byte++) {
    if (byte !== 0x2f && members.has(byte) !== negated) matched.push(byte)
  }
  return { source: matched.length ? `[${matched.map(hex).join('')}]` : '(?!)', end: i + 1 }
}

/** {source}: the regex (over latin1-of-UTF-8 strings) of a glob, or {reason} it is refused. */
export function patternRegex(pattern) {
  if (pattern.includes('\\')) return { reason: 'backslash escapes are not supported' }
  if (pattern.startsWith('/') || pattern.endsWith('/')) {
    return { reason: "must not start or end with '/' (patterns are anchored at the workspace root)" }
  }
  const components = pattern.split('/')
  if (components.some((part) => part === '' || part === '.' || part === '..')) {
    return { reason: "must not contain empty, '.' or '..' components" }
  }
  const out = []
  const last = components.length - 1
  for (const [index, part] of components.entries()) {
    if (part === '**') {
      out.push(index === last ? '.*' : '(?:.*/)?')
      continue
    }
    if (part.includes('**')) return { reason: "'**' must be a whole path component ('**/x', 'a/**/b' or 'a/**')" }
    let i = 0
    while (i < part.length) {
      const char = part[i]
      if (char === '*') {
        out.push('[^/]*')
        i += 1
      } else if (char === '?') {
        out.push('[^/]')
        i += 1
      } else if (char === '[') {
        const parsed = classRegex(part, i)
        if (parsed.reason) return parsed
        out.push(parsed.source)
        i = parsed.end
      } else {
        const code = part.codePointAt(i)
        const width = code > 0xffff ? 2 : 1
        for (const byte of bytesOf(part.slice(i, i + width))) out.push(hex(byte))
        i += width
      }
    }
    if (index !== last) out.push('/')
  }
  return { source: out.join('') }
}

/** A matcher for the project's exclusions; a TreeError naming a pattern the server refuses. */
export function compileExclusions(patterns) {
  if (!Array.isArray(patterns)) throw new TreeError('', 'the project\'s tree_exclusions is not a list')
  const regexes = []
  for (const [index, pattern] of patterns.entries()) {
    if (typeof pattern !== 'string' || !pattern || pattern.includes('\0')) {
      throw new TreeError('', `tree_exclusions[${index}]: must be a non-empty pattern without NUL`)
    }
    const { source, reason } = patternRegex(pattern)
    if (reason) throw new TreeError('', `tree_exclusions[${index}] ${JSON.stringify(pattern)}: ${reason}`)
    regexes.push(source)
  }
  const literal = new Set(patterns.map((p) => bytesOf(p).toString('latin1')))
  const glob = regexes.length ? new RegExp(`^(?:${regexes.map((r) => `(?:${r})`).join('|')})$`, 's') : null
  return {
    patterns,
    /** Is `path` (latin1 of its UTF-8 bytes) excluded? A directory is tested with a trailing "/". */
    excludes(path, isDirectory) {
      if (literal.has(path)) return true
      return glob !== null && glob.test(isDirectory ? path + '/' : path)
    },
  }
}

// --- names git refuses (read-cache.c verify_path with core.protectNTFS on) --------------------

const lowerAscii = (buffer) => Buffer.from(buffer.map((b) => (b >= 0x41 && b <= 0x5a ? b + 32 : b)))
const is = (buffer, text) => buffer.equals(Buffer.from(text, 'latin1'))

function ntfsDotgit(name) {
  const lower = lowerAscii(name.subarray(0, 5))
  let rest
  if (is(lower.subarray(0, 4), '.git')) rest = name.subarray(4)
  else if (is(lower, 'git~1')) rest = name.subarray(5)
  else return false
  for (const byte of rest) {
    if (byte === 0x2f || byte === 0x5c || byte === 0x3a) return true
    if (byte !== 0x2e && byte !== 0x20) return false
  }
  return true
}

function ntfsDotgitmodules(name) {
  const onlySpacesAndPeriods = (rest) => {
    for (const byte of rest) {
      if (byte === 0x3a) return true
      if (byte !== 0x2e && byte !== 0x20) return false
    }
    return true
  }
  if (name[0] === 0x2e && is(lowerAscii(name.subarray(1, 11)), 'gitmodules')) return onlySpacesAndPeriods(name.subarray(11))
  if (is(lowerAscii(name.subarray(0, 6)), 'gitmod') && name[6] === 0x7e && name.length > 7 && name[7] >= 0x31 && name[7] <= 0x34) {
    return onlySpacesAndPeriods(name.subarray(8))
  }
  let i = 0
  let sawTilde = false
  while (i < 8) {
    if (i >= name.length) return false
    const byte = name[i]
    if (sawTilde) {
      if (byte < 0x30 || byte > 0x39) return false
    } else if (byte === 0x7e) {
      i += 1
      if (i >= name.length || name[i] < 0x31 || name[i] > 0x39) return false
      sawTilde = true
    } else if (i >= 6 || byte & 0x80 || lowerAscii(Buffer.from([byte]))[0] !== 'gi7eba'.charCodeAt(i)) {
      return false
    }
    i += 1
  }
  return onlySpacesAndPeriods(name.subarray(8))
}

/** [git refuses a path through this component, git refuses it when the path ends in a symlink]. */
function refusal(name, leaf) {
  const tail = leaf ? Buffer.alloc(0) : Buffer.from('/')
  const starts = [0]
  name.forEach((byte, i) => { if (byte === 0x5c) starts.push(i + 1) })
  const lower = lowerAscii(name)
  const refused = is(lower, '.git') || starts.some((i) => ntfsDotgit(name.subarray(i)))
  const refusedForSymlink = is(lower, '.gitmodules') || starts.some((i) => ntfsDotgitmodules(Buffer.concat([name.subarray(i), tail])))
  return [refused, refusedForSymlink]
}

// --- the walk ---------------------------------------------------------------------------------

function kind(stats) {
  if (stats.isFIFO()) return 'a FIFO'
  if (stats.isSocket()) return 'a socket'
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return 'a device'
  return 'not a regular file, symlink or directory'
}

const sameStat = (a, b) => a.dev === b.dev && a.ino === b.ino && a.size === b.size
  && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs && a.mode === b.mode

/** The bytes of a regular file, read without following a symlink; null if it is gone or changed kind. */
async function readRegular(full, before, limit) {
  let handle
  try {
    handle = await open(full, OPEN_FILE)
  } catch (error) {
    if (error.code === 'EACCES' || error.code === 'EPERM') throw error
    return null
  }
  try {
    const size = Number(before.size)
    if (size > limit) return { tooBig: true }
    const hash = createHash('sha256').update(`blob ${size}\0`)
    const buffer = Buffer.allocUnsafe(Math.min(READ_CHUNK, size + 1))
    let got = 0
    while (got <= size) { // one byte past the size: a file that grew is caught
      const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, size + 1 - got), null)
      if (!bytesRead) break
      got += bytesRead
      hash.update(buffer.subarray(0, bytesRead))
    }
    const after = await handle.stat({ bigint: true })
    return got === size && sameStat(after, before) ? { blob: hash.digest(), stats: after } : null
  } finally {
    await handle.close()
  }
}

class Walk {
  constructor(root, exclusions, { maxFiles, maxBytes, maxBlobBytes }) {
    this.root = root
    this.exclusions = exclusions
    this.maxFiles = maxFiles
    this.maxBytes = maxBytes
    this.maxBlobBytes = maxBlobBytes
    this.files = 0
    this.size = 0
  }

  count(path, files, size) {
    this.files += files
    this.size += size
    if (this.files > this.maxFiles) throw new TreeError(path, `the workspace has more than max_files=${this.maxFiles} files (the project's limit)`)
    if (this.size > this.maxBytes) throw new TreeError(path, `the workspace's files exceed max_bytes=${this.maxBytes} bytes (the project's limit)`)
  }

  /**
   * [the raw tree id of the directory at `prefix` ('' or 'a/b/'), null when it holds nothing;
   * its files and symlinks, in git's order].
   */
  async directory(prefix, depth, symlinksRefused) {
    const full = prefix ? join(this.root, prefix) : this.root
    let dirents
    try {
      dirents = await readdir(Buffer.from(full), { withFileTypes: true, encoding: 'buffer' })
    } catch (error) {
      throw new TreeError(prefix.replace(/\/$/, ''), error.code === 'ENOENT' || error.code === 'ENOTDIR' ? CHANGED : `cannot be listed (${error.code})`)
    }
    const listing = []
    for (const dirent of dirents) {
      const raw = Buffer.from(dirent.name)
      let name
      try {
        name = UTF8.decode(raw)
      } catch {
        throw new TreeError(prefix + raw.toString('latin1'), 'the name is not valid UTF-8')
      }
      const directory = dirent.isDirectory()
      listing.push({ sort: directory ? Buffer.concat([raw, Buffer.from('/')]) : raw, raw, name, directory })
    }
    listing.sort((a, b) => Buffer.compare(a.sort, b.sort))
    // As the server does: subdirectories are walked (and leaves lstat-ed) in order first, then
    // this directory's files are counted and read, so a cap or a refusal names the same path.
    const kept = []
    for (const { raw, name, directory } of listing) {
      const path = prefix + name
      if (depth === 0 && SKIPPED_AT_TOP.has(name)) continue
      if (this.exclusions.excludes(bytesOf(path).toString('latin1'), directory)) continue
      let symlinkRefused = symlinksRefused
      if ('.gG~'.includes(name[0]) || name.includes('\\')) {
        const [refused, refusedForSymlink] = refusal(raw, !directory)
        if (name === '.git') throw new TreeError(path, 'a nested .git (another repository or a worktree\'s link) cannot be hashed')
        if (refused) throw new TreeError(path, 'git refuses this name (.git under another spelling)')
        symlinkRefused ||= refusedForSymlink
      }
      if (directory) {
        if (depth + 1 > MAX_DEPTH) throw new TreeError(path, `is nested deeper than ${MAX_DEPTH} directories`)
        const [tree, entries] = await this.directory(path + '/', depth + 1, symlinkRefused)
        kept.push({ raw, tree, entries })
        continue
      }
      let stats
      try {
        stats = await lstat(join(this.root, path), { bigint: true })
      } catch {
        throw new TreeError(path, CHANGED)
      }
      if (symlinkRefused && stats.isSymbolicLink()) throw new TreeError(path, 'git refuses a symlink named or under .gitmodules (under any spelling)')
      kept.push({ raw, path, stats })
    }
    const records = []
    const leaves = new Map()
    for (const item of kept) {
      if (item.path === undefined) continue
      leaves.set(item, await this.leaf(item.path, item.stats))
    }
    /** [path, {mode, blob, size}] of every file below, in git's order */
    const entries = []
    for (const item of kept) {
      if (item.path === undefined) {
        if (item.tree !== null) records.push(Buffer.concat([Buffer.from('40000 '), item.raw, Buffer.from([0]), item.tree]))
        entries.push(...item.entries)
        continue
      }
      const [mode, blob, size] = leaves.get(item)
      records.push(Buffer.concat([Buffer.from(`${mode} `), item.raw, Buffer.from([0]), blob]))
      entries.push([item.path, { mode, blob: blob.toString('hex'), size }])
    }
    if (!records.length) return [null, entries]
    const body = Buffer.concat(records)
    return [createHash('sha256').update(`tree ${body.length}\0`).update(body).digest(), entries]
  }

  async leaf(path, stats) {
    const full = join(this.root, path)
    if (stats.isSymbolicLink()) {
      let target
      try {
        target = await readlink(full, { encoding: 'buffer' })
      } catch {
        throw new TreeError(path, CHANGED)
      }
      this.count(path, 1, target.length)
      return ['120000', createHash('sha256').update(`blob ${target.length}\0`).update(target).digest(), target.length]
    }
    if (!stats.isFile()) throw new TreeError(path, `is ${kind(stats)}; only regular files and symlinks can be hashed`)
    this.count(path, 1, Number(stats.size))
    for (let attempt = 0; attempt < 2; attempt++) {
      if (attempt) {
        try {
          const again = await lstat(full, { bigint: true })
          if (!again.isFile()) throw new Error('not a file')
          this.count(path, 0, Number(again.size - stats.size))
          stats = again
        } catch (error) {
          if (error instanceof TreeError) throw error
          throw new TreeError(path, CHANGED)
        }
      }
      let read
      try {
        read = await readRegular(full, stats, this.maxBlobBytes)
      } catch (error) {
        throw new TreeError(path, `cannot be read (${error.code})`)
      }
      if (read?.tooBig) throw new TreeError(path, `is ${stats.size} bytes, over the largest blob the governor takes (max_blob_bytes=${this.maxBlobBytes})`)
      if (read) {
        const mode = (Number(read.stats.mode) & 0o100) ? '100755' : '100644'
        return [mode, read.blob, Number(read.stats.size)]
      }
    }
    throw new TreeError(path, CHANGED + ' (twice)')
  }
}

/** Git refuses a pathspec whose leading components reach a symlink: the tree is refused as well. */
async function refusePatternsThroughSymlinks(root, patterns) {
  for (const pattern of patterns) {
    const leading = pattern.split('/').slice(0, -1)
    for (let depth = 0; depth < leading.length; depth++) {
      let stats
      try {
        stats = await lstat(join(root, ...leading.slice(0, depth + 1)))
      } catch {
        break
      }
      if (stats.isSymbolicLink()) {
        throw new TreeError(leading.slice(0, depth + 1).join('/'), `a symlink that the exclusion ${JSON.stringify(pattern)} passes through (git refuses such a pathspec)`)
      }
      if (!stats.isDirectory()) break
    }
  }
}

/**
 * The tree of `root` as the server computes it.
 * @param {string} root an absolute directory
 * @param {{exclusions?: string[], maxFiles?: number, maxBytes?: number, maxBlobBytes?: number}} [limits]
 * @returns {Promise<{id: string, files: number, bytes: number, entries: Map<string, {mode: string, blob: string, size: number}>}>}
 */
export async function hashTree(root, { exclusions = [], maxFiles = Infinity, maxBytes = Infinity, maxBlobBytes = Infinity } = {}) {
  const canonical = [...new Set(exclusions)].sort()
  const matcher = compileExclusions(canonical)
  let rootStats
  try {
    rootStats = await lstat(root)
  } catch (error) {
    throw new TreeError('', `the workspace ${root} cannot be opened (${error.code})`)
  }
  if (!rootStats.isDirectory()) throw new TreeError('', `the workspace ${root} is not a directory`)
  await refusePatternsThroughSymlinks(root, canonical)
  const walk = new Walk(root, matcher, { maxFiles, maxBytes, maxBlobBytes })
  const [raw, entries] = await walk.directory('', 0, false)
  return { id: TREE_ID_PREFIX + (raw ?? EMPTY_TREE).toString('hex'), files: walk.files, bytes: walk.size, entries: new Map(entries) }
}

// --- the upload -------------------------------------------------------------------------------

/** The bytes of `path` as hashed, checked against its blob id. */
async function content(root, path, { mode, blob }) {
  const full = join(root, path)
  let data
  try {
    if (mode === '120000') {
      data = await readlink(full, { encoding: 'buffer' })
    } else {
      const handle = await open(full, OPEN_FILE)
      try {
        data = await handle.readFile()
      } finally {
        await handle.close()
      }
    }
  } catch {
    data = null
  }
  if (data === null || blobId(data) !== blob) {
    throw new TreeError(path, 'changed while the snapshot was being uploaded: upload again')
  }
  return data
}

/**
 * The requests that send `missing`, as [batch?, ids]: each large blob alone (a PUT), the others
 * packed in batches within this client's and the server's caps (a server that names no batch
 * caps takes one PUT per blob).
 */
export function groups(missing, sizeOf, project) {
  if (project.max_batch_bytes === undefined) return missing.map((blob) => [false, [blob]])
  const capBytes = Math.min(BATCH_BYTES, project.max_batch_bytes)
  const capBlobs = Math.min(BATCH_BLOBS, project.max_batch_blobs ?? BATCH_BLOBS)
  const out = []
  let batch = []
  let batchBytes = 0
  for (const blob of missing) {
    const size = sizeOf(blob)
    const framed = size + 86 // the header line: 64 hex, a space, up to 20 digits, \n
    if (size >= LARGE_BLOB || framed > capBytes) {
      out.push([false, [blob]])
      continue
    }
    if (batch.length && (batchBytes + framed > capBytes || batch.length >= capBlobs)) {
      out.push([true, batch])
      batch = []
      batchBytes = 0
    }
    batch.push(blob)
    batchBytes += framed
  }
  if (batch.length) out.push([true, batch])
  return out
}

async function inParallel(items, workers, run) {
  let next = 0
  const worker = async () => {
    while (next < items.length) await run(items[next++])
  }
  await Promise.all(Array.from({ length: Math.min(workers, items.length) }, worker))
}

/**
 * Upload `root` as the newest snapshot of governor session `sessionId`.
 * `last`: what the previous upload of this session left ({session, exclusions, tree, entries}),
 * or null. Resolves to {tree, files, bytes, sentBlobs, sentBytes, unchanged, last} where `last`
 * is what to keep for the next upload.
 */
export async function uploadSnapshot({ client, sessionId, root, last = null, workers = 4 }) {
  const project = await client.project()
  const exclusions = [...new Set(project.tree_exclusions)].sort()
  const tree = await hashTree(root, {
    exclusions, maxFiles: project.tree_max_files, maxBytes: project.tree_max_bytes, maxBlobBytes: project.max_blob_bytes,
  })
  const entries = Object.fromEntries([...tree.entries].map(([path, e]) => [path, [e.mode, e.blob]]))
  const mine = last && last.session === sessionId && JSON.stringify(last.exclusions) === JSON.stringify(exclusions) ? last : null
  if (mine && mine.tree === tree.id) {
    return { tree: tree.id, files: tree.files, bytes: tree.bytes, sentBlobs: 0, sentBytes: 0, unchanged: true, last: mine }
  }
  const send = async (base) => {
    const known = new Set(base ? Object.values(base.entries).map((entry) => entry[1]) : [])
    /** blob -> [path, entry] */
    const wanted = new Map()
    for (const [path, entry] of tree.entries) if (!known.has(entry.blob) && !wanted.has(entry.blob)) wanted.set(entry.blob, [path, entry])
    const ids = [...wanted.keys()].sort()
    const missing = []
    for (let start = 0; start < ids.length; start += MISSING_PER_REQUEST) {
      missing.push(...await client.blobsMissing(ids.slice(start, start + MISSING_PER_REQUEST)))
    }
    let sentBytes = 0
    await inParallel(groups(missing, (blob) => wanted.get(blob)[1].size, project), workers, async ([batch, ids]) => {
      const contents = []
      for (const blob of ids) {
        const [path, entry] = wanted.get(blob)
        contents.push([blob, await content(root, path, entry)])
      }
      if (batch) await client.putBlobs(contents)
      else await client.putBlob(...contents[0])
      for (const [, data] of contents) sentBytes += data.length
    })
    let answer
    if (base) {
      const changed = Object.entries(entries)
        .filter(([path, [mode, blob]]) => base.entries[path]?.[0] !== mode || base.entries[path]?.[1] !== blob)
        .map(([path, [mode, blob]]) => ({ path, mode, blob }))
      for (const path of Object.keys(base.entries)) if (!(path in entries)) changed.push({ path, mode: '100644', blob: null })
      answer = await client.createSnapshot(sessionId, changed, base.tree)
    } else {
      answer = await client.createSnapshot(sessionId, Object.entries(entries).map(([path, [mode, blob]]) => ({ path, mode, blob })))
    }
    if (answer.tree !== tree.id) {
      throw new TreeError('', `the governor computed ${answer.tree} for the tree computed here as ${tree.id}`)
    }
    return { ...answer, sentBlobs: missing.length, sentBytes, unchanged: false, last: { session: sessionId, exclusions, tree: tree.id, entries } }
  }
  if (mine) {
    try {
      return await send(mine)
    } catch (error) {
      // The base is gone, or was recorded under other exclusions: send the tree whole.
      if (!(error instanceof GovernorError) || error.status !== 404) throw error
    }
  }
  return send(null)
}
