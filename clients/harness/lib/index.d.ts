// Type declarations of @reliability-governor/dsh-plugin (hand-written; the code is plain ESM).

/** The plugin's Cordis config (in the bundle patch, or overridden in the profile's patch). */
export interface Config {
  /** The governor's root URL, e.g. http://127.0.0.1:8000; default: the GOVERNOR_URL variable. */
  url?: string
  /** The name of the environment variable holding the agent token (default GOVERNOR_TOKEN). */
  tokenEnv?: string
  /**
   * What the governor session is bound to: the Harness session's cwd (`cwd`), or snapshots of
   * it uploaded for a governor that shares no disk (`snapshot`).
   */
  workspace?: 'cwd' | 'snapshot'
  /** Where unsent events are spooled (default `$DSH_HOME/reliability-governor/spool`). */
  spoolDir?: string
  /** How long a stop (or a governor tool) waits for the log to be sent, in ms (default 20000). */
  stopBudgetMs?: number
  /** How long reliability_begin waits for a pending review by default, in s (default 300). */
  reviewWaitSeconds?: number
}

export interface ResolvedConfig {
  url: string
  token: string
  workspace: 'cwd' | 'snapshot'
  spoolDir: string
  stopBudgetMs: number
  reviewWaitSeconds: number
}

export class ConfigError extends Error {
  readonly field: string
  constructor(field: string, reason: string)
}

export function resolveConfig(config?: Config, env?: Record<string, string | undefined>): ResolvedConfig

export class GovernorError extends Error {
  /** The HTTP status, 0 when no answer came. */
  readonly status: number
  readonly code: string
  readonly details: unknown
  readonly retryable: boolean
}

export class GovernorClient {
  constructor(options: { url: string; token: string; timeoutMs?: number })
  request(method: string, path: string, options?: { body?: unknown; raw?: Uint8Array; headers?: Record<string, string>; timeoutMs?: number }): Promise<any>
  /** `workspace`: a path, or `{kind: 'snapshot'}`. */
  createSession(options: { externalId: string; workspace: string | { kind: 'snapshot' }; header?: object }): Promise<{ id: string; next_seq: number }>
  status(sessionId: string): Promise<any>
  appendEvents(sessionId: string, events: object[], options: { expectedSeq: number; key: string }): Promise<{ first_seq: number; last_seq: number; head: string }>
  turnStop(sessionId: string, tree?: string): Promise<{ action: 'allow' | 'steer'; message: string }>
  project(): Promise<{ slug: string; tree_exclusions: string[]; tree_max_files: number; tree_max_bytes: number; max_blob_bytes: number; max_batch_bytes?: number; max_batch_blobs?: number }>
  blobsMissing(blobs: string[]): Promise<string[]>
  putBlob(blob: string, data: Uint8Array): Promise<{ blob: string }>
  /** Many blobs in one `POST /blobs`, all or none. */
  putBlobs(blobs: Array<[string, Uint8Array]>): Promise<{ stored: string[]; present: string[] }>
  createSnapshot(sessionId: string, entries: Array<{ path: string; mode: string; blob: string | null }>, base?: string): Promise<{ tree: string; exclusions: string; files: number; bytes: number; number: number }>
  review(sessionId: string, waitSeconds: number): Promise<{ review: any }>
  codeVerification(runId: string, waitSeconds: number): Promise<any>
}

/** A tree the governor would refuse to hash, or an upload that failed; `path` names the entry. */
export class TreeError extends GovernorError {
  readonly path: string
  readonly reason: string
}

export interface Tree {
  id: string
  files: number
  bytes: number
  /** path -> mode, blob id, size; in git's order */
  entries: Map<string, { mode: '100644' | '100755' | '120000'; blob: string; size: number }>
}

/** The git blob id (SHA-256 object format) of `data`, 64 hex digits. */
export function blobId(data: Uint8Array): string

/** The tree of `root` as the governor computes it (rules §10.1). */
export function hashTree(root: string, limits?: { exclusions?: string[]; maxFiles?: number; maxBytes?: number; maxBlobBytes?: number }): Promise<Tree>

export interface LastSnapshot {
  session: string
  exclusions: string[]
  tree: string
  entries: Record<string, [string, string]>
}

/** Upload `root` as the newest snapshot of `sessionId`: only missing blobs, a change over `last`. */
export function uploadSnapshot(options: { client: GovernorClient; sessionId: string; root: string; last?: LastSnapshot | null; workers?: number }): Promise<{
  tree: string; files: number; bytes: number; sentBlobs: number; sentBytes: number; unchanged: boolean; last: LastSnapshot
}>

/** The snapshots of one Harness session's cwd: uploads one at a time, in order. */
export class Snapshots {
  constructor(options: { client: GovernorClient; root: string; file: string; sessionId: () => Promise<string>; log?: (line: string) => void })
  upload(): ReturnType<typeof uploadSnapshot>
  /** After a tool result: an upload in the background. */
  background(): void
  /** Upload, then `request(tree)`; with `budgetMs`, rejects with "upload in progress" when the upload is not done by then. */
  withTree<T>(request: (tree: string) => Promise<T>, budgetMs?: number): Promise<T>
}

export const UPLOAD_IN_PROGRESS: 'UPLOAD_IN_PROGRESS'

/** The governor's envelope of a committed Harness event. */
export interface Envelope {
  type: string
  seq?: number
  time?: number
  data: unknown
  ignorable?: boolean
  surfaceOp?: string
  sourceEventSeqs?: number[]
}

export function envelope(event: Record<string, unknown>): Envelope

export class EventStream {
  constructor(options: {
    client: GovernorClient; dir: string; harnessSessionId: string
    workspace?: string; header?: object; log?: (line: string) => void
  })
  readonly drained: boolean
  /** Spool one committed event and start sending it; returns at once. */
  push(event: Record<string, unknown>): void
  /** Resolves to null once the governor has every event, else to why not (within budgetMs). */
  flush(budgetMs: number): Promise<Error | null>
  /** The governor session id, creating the session on first use. */
  session(): Promise<string>
}

export interface HarnessMessage {
  role: 'user'
  id: string
  content: Array<{ type: 'text'; text: string }>
  source: { kind: 'plugin'; plugin: string }
}

export const PLUGIN_SOURCE: { kind: 'plugin'; plugin: 'reliability-governor' }
export const UNASKED_STOPS_ALLOWED_AT: number
export function pluginMessage(text: string): HarnessMessage

export interface GovernorTool {
  name: string
  description: string
  parameters: object
  /** `judge`: how a request that judges the workspace is made (snapshot mode: after an upload, naming the tree). */
  run(args: any, session: { id: string; client: GovernorClient; judge?: <T>(request: (tree?: string) => Promise<T>) => Promise<T> }): Promise<unknown>
}

export function governorTools(options: { reviewWaitSeconds: number }): GovernorTool[]

export interface StopAgent {
  session: { header: { id: string; cwd: string } }
  steer(message: HarnessMessage): void
  inject(message: HarnessMessage): void
}

export class Governor {
  constructor(config: ResolvedConfig, log?: (line: string) => void)
  onEvent(session: { header: { id: string; cwd: string } }, event: Record<string, unknown>): void
  onTurnStopping(payload: { agent: StopAgent }): Promise<{ action: 'allow' | 'steer'; message: string }>
  resumeSpools(): void
  /** Harness tool definitions (name, description, parameters, output, execute). */
  tools(): object[]
}

export const name: 'reliability-governor'
export const inject: string[]
export function apply(ctx: any, config: Config): void
