// Every file dialog of the GUI, so none of them opens a file to look at it.
//
// Qt's file dialogs (its own and the platform's, which run in this process too) open each listed
// file to sniff its type for the icon and the "Type" column. Opening and closing a database this
// process has open drops every SQLite lock the process holds on it (POSIX record locks belong to
// the process, files_in_use.h): another process then deletes the WAL under the GUI, and the
// database can be damaged. These dialogs use Qt's own dialog with plain_icon_provider(), which
// names files by their suffix and never opens them.
#pragma once
#include <QAbstractFileIconProvider>
#include <QFileDialog>
#include <QString>
#include <functional>

class QWidget;

namespace snip::ui {

// Icons and types from the name alone (a folder or a file, the suffix), never the contents.
QAbstractFileIconProvider* plain_icon_provider();

// The dialogs of QFileDialog's static functions, with the provider above. "" when cancelled.
// Given no folder (an empty `dir`, or a bare file name to save as), a dialog starts in the folder
// of the last file chosen in any of them.
QString open_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter);
QString save_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter,
                       QFileDialog::Options options = {});
QString existing_directory(QWidget* parent, const QString& caption, const QString& dir);

// Tests: called with every dialog just before it runs; the dialog lists its folder from then on.
void set_dialog_observer(std::function<void(QFileDialog&)> observer);

}  // namespace snip::ui
