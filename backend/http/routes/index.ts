import type { Deps } from '../../deps.js';
import type { App } from '../app.js';
import { registerHealthRoutes } from './health.js';

/** Every route group of the service, in one list. */
export function registerRoutes(app: App, deps: Deps): void {
  registerHealthRoutes(app, deps);
}
