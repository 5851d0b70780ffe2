// Leveled logger writing to stderr (stdout stays clean for commands that print JSON). No console.log elsewhere.

/** Log levels in increasing severity (SGLang's --log-level names). */
export type LogLevel = 'debug' | 'info' | 'warning' | 'error';

const LEVEL_ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warning: 30, error: 40 };

/** A logger bound to a prefix (e.g. `[tp0]`) and a minimum level. Writes one line per call to stderr. */
export class Logger {
  constructor(
    private readonly minLevel: LogLevel = 'info',
    private readonly prefix = '',
    private readonly write: (line: string) => void = (line) => process.stderr.write(line),
  ) {}

  /** A logger with the same level and sink and an extra prefix (e.g. a rank tag). */
  child(prefix: string): Logger {
    return new Logger(this.minLevel, this.prefix + prefix, this.write);
  }

  /** True if messages at `level` are printed. */
  isEnabled(level: LogLevel): boolean {
    return LEVEL_ORDER[level] >= LEVEL_ORDER[this.minLevel];
  }

  /** Writes `msg` at debug level (dropped unless the logger's level is debug). */
  debug(msg: string): void { this.log('debug', msg); }
  /** Writes `msg` at info level. */
  info(msg: string): void { this.log('info', msg); }
  /** Writes `msg` at warning level (SGLang's name for the level, not `warn`). */
  warning(msg: string): void { this.log('warning', msg); }
  /** Writes `msg` at error level (printed at every level). */
  error(msg: string): void { this.log('error', msg); }

  private log(level: LogLevel, msg: string): void {
    if (!this.isEnabled(level)) return;
    const ts = new Date().toISOString().replace('T', ' ').slice(0, 19);
    const tag = level === 'info' ? '' : ` ${level.toUpperCase()}`;
    this.write(`[${ts}${this.prefix ? ' ' + this.prefix : ''}]${tag} ${msg}\n`);
  }
}

/** A logger that drops everything (tests). */
export const SILENT_LOGGER = new Logger('error', '', () => {});
